# shellcheck shell=bash
# Sourced by the study scripts and launch/quickstart.sh: the one rule for the
# folders they write, and the one way they start the tools.
#
# pf_claim_output NAME DIR   DIR (given by the variable or argument NAME) is
#   the script's output folder. Accepted: a path that does not exist (created,
#   with the marker), an empty folder (the marker is written), or a folder
#   that holds this script's marker `.performer-study-<script>`: an earlier
#   output of the same script. Anything else (a file, a symbolic link, a
#   folder with other entries, or with another script's marker) is refused:
#   the message names the script, NAME, DIR and why; exit status 2, nothing
#   touched.
# pf_check_output NAME DIR   the same refusals, without creating anything: a
#   script that writes two folders checks both before it claims either.
# pf_remove_own DIR ENTRY...  removes the named entries (plain names the
#   script itself writes, never DIR itself) from a folder that holds the
#   script's marker, and only from such a folder.
# pf_run COMMAND [ARG...]  runs COMMAND in the background (standard input
#   /dev/null) and waits for it, returning its exit status. When the script
#   gets SIGINT, SIGTERM or SIGHUP, the running command and every process
#   below it get SIGTERM, then SIGKILL after PF_STOP_GRACE_S seconds (default
#   30: the trainer saves a checkpoint first); the script exits with 128 + the
#   signal. A signal waits for a command in the foreground, a pipeline or a
#   $(...) to end, so every tool runs through pf_run, its output redirected to
#   a file.
#
# PF_SCRIPT is the script's name in messages and in the marker (default: the
# base name of $0).

PF_SCRIPT=${PF_SCRIPT:-$(basename -- "$0")}
PF_CHILD=""
PF_OUTPUT_STATE=""
PF_TREE=()
PF_ALIVE=()

pf_marker() { printf '.performer-study-%s' "$PF_SCRIPT"; }

# pf_check_output NAME DIR: sets PF_OUTPUT_STATE to new (no such path), empty
# or own (the script's earlier output); exits 2 on the rest.
pf_check_output() {
  local name=$1 dir=$2 marker entries first count more other
  marker=$(pf_marker)
  if [ -z "$dir" ]; then
    echo "$PF_SCRIPT: $name is empty; name a new or empty folder" >&2
    exit 2
  fi
  if [ -L "$dir" ]; then
    echo "$PF_SCRIPT: $name '$dir': is a symbolic link (to '$(readlink -- "$dir")'); name the folder itself" >&2
    exit 2
  fi
  PF_OUTPUT_STATE=new
  if [ ! -e "$dir" ]; then
    return 0
  elif [ ! -d "$dir" ]; then
    echo "$PF_SCRIPT: $name '$dir': exists and is not a folder; name a new or empty folder" >&2
    exit 2
  elif [ -f "$dir/$marker" ] && [ ! -L "$dir/$marker" ]; then
    PF_OUTPUT_STATE=own
  else
    if ! entries=$(find "$dir" -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | LC_ALL=C sort); then
      echo "$PF_SCRIPT: $name '$dir': cannot be read" >&2
      exit 2
    fi
    if [ -n "$entries" ]; then
      other=$(printf '%s\n' "$entries" | grep -m1 '^\.performer-study-' || true)
      if [ -n "$other" ]; then
        echo "$PF_SCRIPT: $name '$dir': holds '$other', the output of ${other#.performer-study-}," \
          "not of $PF_SCRIPT; name a new or empty folder" >&2
        exit 2
      fi
      first=$(printf '%s\n' "$entries" | head -1)
      count=$(printf '%s\n' "$entries" | wc -l)
      more=""
      if [ "$count" -gt 1 ]; then more=" and $((count - 1)) more"; fi
      echo "$PF_SCRIPT: $name '$dir': holds '$first'$more, which $PF_SCRIPT did not write (no $marker there);" \
        "name a new or empty folder" >&2
      exit 2
    fi
    PF_OUTPUT_STATE=empty
  fi
}

pf_claim_output() {
  local name=$1 dir=$2 marker why
  marker=$(pf_marker)
  pf_check_output "$name" "$dir"
  [ "$PF_OUTPUT_STATE" = own ] && return 0
  if [ "$PF_OUTPUT_STATE" = new ] && ! why=$(mkdir -p -- "$dir" 2>&1); then
    echo "$PF_SCRIPT: $name '$dir': cannot be created (${why##*: })" >&2
    exit 2
  fi
  if ! printf 'output folder of %s: it replaces only its own files here on a rerun\n' "$PF_SCRIPT" \
      2>/dev/null >"$dir/$marker"; then
    echo "$PF_SCRIPT: $name '$dir': cannot be written (no $marker made there)" >&2
    exit 2
  fi
}

pf_remove_own() {
  local dir=$1 entry
  shift
  if [ ! -f "$dir/$(pf_marker)" ]; then
    echo "$PF_SCRIPT: '$dir' holds no $(pf_marker): not its output folder, nothing removed" >&2
    exit 1
  fi
  for entry in "$@"; do
    case $entry in
      "" | . | .. | */* | .performer-study-*)
        echo "$PF_SCRIPT: '$entry' is not an entry it writes in '$dir'; nothing removed" >&2
        exit 1 ;;
    esac
  done
  for entry in "$@"; do rm -rf -- "${dir:?}/$entry"; done
}

# pf_tree PID: sets PF_TREE to PID and every process below it (from /proc).
pf_tree() {
  local stat line ppid i=0
  local -a kids
  local -A below=()
  for stat in /proc/[0-9]*/stat; do
    read -r line 2>/dev/null <"$stat" || continue
    ppid=${line##*) }  # "STATE PPID ...", after the command name (which may hold spaces)
    ppid=${ppid#* }
    below[${ppid%% *}]+=" ${line%% *}"
  done
  PF_TREE=("$1")
  while [ "$i" -lt "${#PF_TREE[@]}" ]; do
    read -ra kids <<<"${below[${PF_TREE[i]}]:-}"
    PF_TREE+=("${kids[@]}")
    i=$((i + 1))
  done
}

# pf_alive PID...: sets PF_ALIVE to those still running (neither gone nor zombies).
pf_alive() {
  local pid line
  PF_ALIVE=()
  for pid in "$@"; do
    read -r line 2>/dev/null <"/proc/$pid/stat" || continue
    line=${line##*) }
    [ "${line%% *}" = Z ] || PF_ALIVE+=("$pid")
  done
}

pf_on_signal() {
  trap '' INT TERM HUP  # the cleanup runs to its end
  local sig=$1 grace=${PF_STOP_GRACE_S:-30} tries=0
  [[ $grace =~ ^[0-9]+$ ]] || grace=30
  if [ -n "$PF_CHILD" ]; then
    pf_tree "$PF_CHILD"
    kill -TERM "${PF_TREE[@]}" 2>/dev/null || true
    pf_alive "${PF_TREE[@]}"
    while [ "${#PF_ALIVE[@]}" -gt 0 ] && [ "$tries" -lt $((grace * 10)) ]; do
      sleep 0.1
      tries=$((tries + 1))
      pf_alive "${PF_ALIVE[@]}"
    done
    if [ "${#PF_ALIVE[@]}" -gt 0 ]; then kill -KILL "${PF_ALIVE[@]}" 2>/dev/null || true; fi
    wait "$PF_CHILD" 2>/dev/null || true
  fi
  echo "$PF_SCRIPT: stopped by SIG$(kill -l "$sig")${PF_CHILD:+, and so was the command it ran}" >&2
  exit $((128 + sig))
}
trap 'pf_on_signal 1' HUP
trap 'pf_on_signal 2' INT
trap 'pf_on_signal 15' TERM

pf_run() {
  local rc=0
  "$@" &
  PF_CHILD=$!
  wait "$PF_CHILD" || rc=$?
  PF_CHILD=""
  return "$rc"
}
