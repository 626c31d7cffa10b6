#!/usr/bin/env bash
# The house rules of the source tree (docs/design.md), read from the files:
#   1. includes go down the rooms, never up or sideways:
#        runtime <- kernels, data <- model <- launch/core <- launch/{train,infer,bench} <- launch/*_main.cc
#      (kernels and data do not include each other; train, infer and bench
#      include launch/core and not each other);
#   2. each HDF5 file kind has one opener: h5_open_file( and H5Fopen( appear
#      only in the owners listed in OPENERS below.
# Usage: house_rules.sh ROOT      checks the tree at ROOT; exit 1 naming each
#                                 breach as file:line, 0 printing "PASS:"
#        house_rules.sh --graph ROOT  the rooms' include arrows as CSV
#                                 (from,to,includes: #include lines from files
#                                 of room `from` naming a file of room `to`)
#        house_rules.sh --self-test   builds small trees that break each
#                                 rule once and asserts that every one fails
set -euo pipefail

# file -> what it opens (the owners of the file kinds).
OPENERS=(
  "data/h5.cc|defines h5_open_file"
  "data/prepared_data.cc|prepared protein data (open_prepared_data)"
  "launch/core/checkpoint_file.cc|checkpoints (open_checkpoint)"
  "data/output_path.cc|an existing output, to recognise what it is"
  "launch/attn_main.cc|the attention tool's tensor file"
)

# Rooms a file in room $1 may include (project-relative prefixes).
allowed_rooms() {
  case "$1" in
    runtime) echo "runtime" ;;
    kernels) echo "kernels runtime" ;;
    data) echo "data runtime" ;;
    model) echo "model kernels data runtime" ;;
    launch/core) echo "launch/core model kernels data runtime" ;;
    launch/train | launch/infer | launch/bench) echo "$1 launch/core model kernels data runtime" ;;
    launch) echo "launch model kernels data runtime" ;;  # the *_main.cc files
    *) echo "" ;;
  esac
}

room_of() {
  case "$1" in
    launch/core/* | launch/train/* | launch/infer/* | launch/bench/*) echo "${1%%/*}/$(echo "$1" | cut -d/ -f2)" ;;
    launch/*/*) echo "other" ;;
    launch/*) echo "launch" ;;
    runtime/* | kernels/* | data/* | model/*) echo "${1%%/*}" ;;
    *) echo "other" ;;
  esac
}

check_tree() {
  local root=$1 breaches=0 f room inc target ok r
  cd "$root"
  while IFS= read -r f; do
    room=$(room_of "$f")
    [ "$room" = other ] && continue
    while IFS=: read -r line inc; do
      target=$(echo "$inc" | sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1/')
      case "$target" in runtime/* | kernels/* | data/* | model/* | launch/*) ;; *) continue ;; esac
      ok=0
      for r in $(allowed_rooms "$room"); do
        case "$target" in "$r"/*) ok=1 ;; esac
      done
      # launch/*_main.cc may include any launch room; launch/<room>/x.h counts
      # as that room for everyone else.
      if [ $ok = 1 ] && [ "$room" != launch ]; then
        case "$target" in
          launch/*/*) case "$target" in "$room"/* | launch/core/*) ;; *) ok=0 ;; esac ;;
        esac
      fi
      if [ $ok = 0 ]; then
        echo "$f:$line: includes \"$target\": room $room may include only $(allowed_rooms "$room")"
        breaches=$((breaches + 1))
      fi
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' "$f" | sed -E 's/^([0-9]+):/\1:/' || true)
  done < <(find runtime kernels data model launch -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) 2>/dev/null | sort)

  local hits owner known
  while IFS= read -r hits; do
    f=${hits%%:*}
    known=0
    for owner in "${OPENERS[@]}"; do
      [ "${owner%%|*}" = "$f" ] && known=1
    done
    if [ $known = 0 ]; then
      echo "$hits: opens an HDF5 file outside the owners of the file kinds (open_checkpoint, open_prepared_data; tests/house/house_rules.sh)"
      breaches=$((breaches + 1))
    fi
  done < <(grep -rnE '\b(h5_open_file|H5Fopen)[[:space:]]*\(' runtime kernels data model launch \
             --include='*.h' --include='*.cc' --include='*.cu' --include='*.cuh' 2>/dev/null | grep -v '^data/h5.h:' || true)

  if [ $breaches -gt 0 ]; then
    echo "FAIL: $breaches breach(es) of the house rules in $root"
    return 1
  fi
  echo "PASS: the includes go down the rooms and every HDF5 file is opened by its kind's owner ($root)"
}

self_test() {
  local tmp fails=0
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  make_tree() {  # a tree that keeps the rules
    rm -rf "$tmp/t" && mkdir -p "$tmp/t"/{runtime,kernels,data,model,launch/core,launch/train,launch/infer,launch/bench}
    echo '#include "runtime/a.h"' > "$tmp/t/kernels/k.cc"
    echo '#include "data/d.h"' > "$tmp/t/model/m.cc"
    echo '#include "launch/core/c.h"' > "$tmp/t/launch/train/t.cc"
    echo '#include "launch/infer/i.h"' > "$tmp/t/launch/infer/i.cc"
    echo '#include "launch/train/t.h"' > "$tmp/t/launch/train_main.cc"
    echo 'H5Id f = h5_open_file(p);' > "$tmp/t/data/prepared_data.cc"
  }
  expect() {  # expect <pass|fail> <what>
    local got=pass
    ( check_tree "$tmp/t" ) > "$tmp/out" 2>&1 || got=fail
    if [ "$got" != "$1" ]; then
      echo "self-test: '$2' should $1 but did $got:"; cat "$tmp/out"; fails=$((fails + 1))
    fi
  }
  make_tree; expect pass "a tree that keeps the rules"
  make_tree; echo '#include "launch/infer/i.h"' >> "$tmp/t/launch/train/t.cc"; expect fail "train includes infer"
  make_tree; echo '#include "launch/bench/b.h"' >> "$tmp/t/launch/infer/i.cc"; expect fail "infer includes bench"
  make_tree; echo '#include "launch/train/t.h"' >> "$tmp/t/launch/core/c.cc"; expect fail "core includes train"
  make_tree; echo '#include "model/m.h"' >> "$tmp/t/kernels/k.cc"; expect fail "kernels include model"
  make_tree; echo '#include "data/d.h"' >> "$tmp/t/kernels/k.cc"; expect fail "kernels include data"
  make_tree; echo '#include "launch/core/c.h"' >> "$tmp/t/model/m.cc"; expect fail "model includes launch"
  make_tree; echo '#  include "kernels/k.h"' >> "$tmp/t/runtime/r.cc"; expect fail "runtime includes kernels"
  make_tree; echo 'H5Id f = h5_open_file(path);' >> "$tmp/t/launch/train/t.cc"; expect fail "train opens a file itself"
  make_tree; echo 'hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);' >> "$tmp/t/launch/infer/i.cc"; expect fail "infer calls H5Fopen"
  if [ $fails -gt 0 ]; then echo "FAIL: the self-test found $fails rule(s) not enforced"; return 1; fi
  echo "PASS: every breach of the self-test trees was caught"
}

room_graph() {
  local f room target
  cd "$1"
  echo "from,to,includes"
  find runtime kernels data model launch -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) | sort |
    while IFS= read -r f; do
      room=$(room_of "$f")
      [ "$room" = other ] && continue
      [ "$room" = launch ] && room="launch/*_main.cc"
      grep -hE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' "$f" |
        sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1/' |
        while IFS= read -r target; do
          case "$target" in runtime/* | kernels/* | data/* | model/* | launch/*) ;; *) continue ;; esac
          target=$(room_of "$target")
          [ "$target" != "$room" ] && echo "$room,$target"
        done || true
    done | sort | uniq -c | awk '{split($2, a, ","); print a[1] "," a[2] "," $1}'
}

case "${1:-}" in
  --self-test) self_test ;;
  --graph) room_graph "$(realpath "${2:?usage: $0 --graph ROOT}")" ;;
  "") echo "usage: $0 ROOT | --self-test" >&2; exit 2 ;;
  *) check_tree "$(realpath "$1")" ;;
esac
