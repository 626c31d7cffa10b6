# Shared by tests/gpu/run.sh and tests/gpu/run_multi.sh (sourced, not run):
# paths, the synthetic training run, and the step runner with its table.
#
# After gpu_init: repo, OUT, BUILD_DIR, JOBS, PF_GPU_DEPS (absolute), exported
# for the steps. A step is a function step_NAME; run_steps runs each under its
# own time limit (`timeout`), logs it to $OUT/NAME.log, and after each step
# prints the table of results and key figures (written by `figure` to
# $OUT/NAME.figure) and writes it to $OUT/summary.md.

. "$(dirname "${BASH_SOURCE[0]}")/deps.sh"
gpu_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# A path as an absolute one without . or .. (relative ones under the repository).
gpu_absolute() { case "$1" in /*) realpath -m -- "$1" ;; *) realpath -m -- "$repo/$1" ;; esac; }

gpu_init() {
  OUT=$(gpu_absolute "${OUT:-$1}")
  BUILD_DIR=$(gpu_absolute "${BUILD_DIR:-build-gpu}")
  JOBS=${JOBS:-$(nproc)}
  PF_GPU_DEPS=$(gpu_absolute "${PF_GPU_DEPS:-.gpu-deps}")
  mkdir -p "$OUT" || { echo "cannot create $OUT" >&2; exit 2; }
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  # Open MPI's PMIx warns on each launch where it finds no compression library.
  export PMIX_MCA_pcompress_base_silence_warning=1
  export repo OUT BUILD_DIR JOBS PF_GPU_DEPS
  export PF_DEPS_ENV="$OUT/deps.env"
  : >"$PF_DEPS_ENV"
}

figure() { echo "$*" >"$OUT/$step_name.figure"; }

# pack_results DIR: the run so far as the few files the remote GPU machine hands
# back (tests/gpu/pack_results.py: DIR/summary.md, DIR/gpu-run.tar.gz,
# DIR/profile.ncu-rep). run_steps calls it after each step (with RESULTS
# set), so that a run stopped from outside leaves every step that ended.
# Nothing to do without DIR.
pack_results() {
  [ -n "$1" ] || return 0
  python3 "$gpu_lib_dir/pack_results.py" "$OUT" "$1" || echo "pack_results: could not pack $OUT into $1" >&2
}
bin() { echo "$BUILD_DIR/launch/$1"; }
# Ranks unpinned (--bind-to none), as the ctest entries run them: Open MPI
# binds each of up to 2 ranks to one core, where its stream and communication
# threads would then share that core.
mpi() { mpiexec --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 "$@"; }

# build_device_probe NVCC OUTPUT ARCH: tests/gpu/device_probe.cu compiled by
# nvcc alone (no CMake), for ARCH (native in the preflight).
build_device_probe() {
  "$1" -O2 -arch="$3" -o "$2" "$repo/tests/gpu/device_probe.cu"
}

# Pre-flight, the first step: one line for each fact the run depends on, and a
# fast stop (the later steps are skipped) when one makes the run pointless:
# no NVIDIA driver or GPU, no CUDA compiler, a device probe that fails (a
# kernel of this toolkit does not run here, for example a CUDA 13 toolkit
# beside an older driver), no NCCL (2.12 or newer) here or packed, too
# little disk, or a build dependency missing with nothing packed to supply
# it. In the dry run only the disk and the dependencies count.
step_preflight() {
  local stop=() line
  echo "glibc: $(getconf GNU_LIBC_VERSION 2>/dev/null || echo unknown)"
  echo "cores: $(nproc); memory: $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
  local free_gib
  free_gib=$(df -Pk "$repo" | awk 'NR == 2 {printf "%d", $4 / 1048576}')
  echo "free disk under $repo: ${free_gib} GiB"
  [ "${free_gib:-0}" -ge 4 ] || stop+=("only ${free_gib:-0} GiB free under $repo; the build and the logs need about 4")
  local gpu="none"
  if command -v nvidia-smi >/dev/null; then
    gpu=$(nvidia-smi --query-gpu=name,memory.total,compute_mode,driver_version,compute_cap --format=csv,noheader 2>&1 |
      head -1)
    echo "GPU (name, memory, compute mode, driver, compute capability): $gpu"
    case "$gpu" in
      *Exclusive*|*Prohibited*) echo "warning: compute mode is not Default: ranks cannot share the GPU, so mission, packed and staged_sp will fail" ;;
    esac
    if [ "$dry" != 1 ]; then
      case "$gpu" in *"NVIDIA-SMI has failed"*|*"No devices"*|"") stop+=("nvidia-smi sees no GPU: $gpu") ;; esac
    fi
  else
    echo "GPU: no nvidia-smi"
    [ "$dry" = 1 ] || stop+=("no nvidia-smi: this machine has no NVIDIA driver")
  fi
  local nvcc
  nvcc=$(find_nvcc)
  if [ -n "$nvcc" ]; then
    echo "nvcc: $nvcc, $("$nvcc" --version | sed -n 's/.*\(release [0-9.]*\).*/\1/p')"
  else
    echo "nvcc: none"
    [ "$dry" = 1 ] || stop+=("no nvcc on PATH or in /usr/local/cuda/bin: the CUDA backend cannot be built")
  fi
  # The device probe: asking nvidia-smi proves a driver, not that a kernel of
  # this toolkit runs on this GPU. The dry run uses no GPU, so it neither
  # builds nor runs the probe (tests/gpu/test_script_parts.sh compiles it and
  # runs it where there is no GPU, where it must fail).
  local probe="not run"
  rm -f "$OUT/device_probe.txt"
  if [ "$dry" != 1 ] && [ -n "$nvcc" ]; then
    local tmp
    tmp=$(mktemp -d)
    if build_device_probe "$nvcc" "$tmp/device_probe" native >"$OUT/device_probe.txt" 2>&1; then
      "$tmp/device_probe" >>"$OUT/device_probe.txt" 2>&1 && probe=ok || probe=failed
    else
      probe="did not compile"
    fi
    rm -rf "$tmp"
    cat "$OUT/device_probe.txt"
    case $probe in
      failed) stop+=("$(grep -m1 'FAILED' "$OUT/device_probe.txt" || echo "device probe: FAILED without a message")") ;;
      "did not compile") stop+=("device probe: nvcc could not compile tests/gpu/device_probe.cu: $(tail -1 "$OUT/device_probe.txt")") ;;
    esac
  fi
  echo "device probe: $probe"
  # NCCL where cmake/cuda.cmake looks for it, else as packed in $PF_GPU_DEPS.
  local nccl nccl_h="" where=""
  nccl=$(find_nccl)
  if [ -n "$nccl" ]; then
    nccl_h=${nccl%% *} where="here"
  elif [ -f "$PF_GPU_DEPS/nccl/include/nccl.h" ]; then
    nccl_h=$PF_GPU_DEPS/nccl/include/nccl.h where="packed ($(cat "$PF_GPU_DEPS/nccl/SOURCE" 2>/dev/null))"
  fi
  local nccl_v=""
  if [ -n "$nccl_h" ]; then
    nccl_v=$(nccl_version "$nccl_h")
    echo "NCCL: $nccl_v, $where: ${nccl:-$nccl_h}"
    [ "$(printf '2.12\n%s\n' "$nccl_v" | sort -V | head -1)" = 2.12 ] ||
      { [ "$dry" = 1 ] || stop+=("NCCL $nccl_v ($nccl_h) is older than the 2.12 the build needs"); }
  else
    echo "NCCL: no nccl.h with libnccl.so here or in $PF_GPU_DEPS/nccl"
    [ "$dry" = 1 ] || stop+=("no NCCL (nccl.h and libnccl.so) in NCCL_ROOT, NCCL_HOME, the CUDA toolkit, /usr or the" \
                             "nvidia-nccl wheel, and none packed in $PF_GPU_DEPS/nccl (tests/gpu/pack_deps.sh)")
  fi
  # The other build dependencies, here or as packages to unpack (step deps).
  local missing debs dep
  missing=$(missing_deps)
  debs=$(ls "$PF_GPU_DEPS"/*.deb 2>/dev/null | wc -l)
  if [ -z "$missing" ]; then
    echo "build dependencies: all installed ($(mpiexec --version 2>&1 | head -1))"
  else
    echo "build dependencies missing here: $missing; $debs packages in $PF_GPU_DEPS"
    for dep in $missing; do
      [ "$dep" = NCCL ] || [ "$debs" -gt 0 ] ||
        { stop+=("no $missing here and no packages in $PF_GPU_DEPS (tests/gpu/pack_deps.sh makes them)"); break; }
    done
  fi
  if [ ${#stop[@]} -gt 0 ]; then
    for line in "${stop[@]}"; do echo "preflight: stop: $line"; done
    figure "stop: ${stop[0]}$([ ${#stop[@]} -gt 1 ] && echo " (and $(( ${#stop[@]} - 1 )) more, in preflight.log)")"
    return 1
  fi
  local versions=""
  [ ! -f "$OUT/device_probe.txt" ] ||
    versions="$(sed -n 's/^device probe: \(driver supports\|runtime (toolkit)\): /\1 /p' "$OUT/device_probe.txt" |
      paste -sd, -), "
  figure "$gpu; ${versions}probe $probe; $(getconf GNU_LIBC_VERSION 2>/dev/null); NCCL ${nccl_v:-none};" \
    "${free_gib} GiB free"
}

step_deps() {
  tests/gpu/unpack_deps.sh "$PF_GPU_DEPS" /opt/performer-deps "$PF_DEPS_ENV" || return 1
  figure "$(tail -1 "$OUT/deps.log")"
}

# What the GPU steps run: the tools and the binaries of the ctest entries
# labelled gpu (an entry is its binary's name, with .npN for rank counts).
# The build makes them as one target, pf_gpu_binaries (tests/CMakeLists.txt),
# so that they compile in parallel; not the whole suite, which would not fit
# the step's limit.
gpu_targets() {
  echo performer-train performer-data performer-bench
  ctest --test-dir "$BUILD_DIR" -N -L gpu | sed -n 's/^ *Test *#[0-9]*: \([A-Za-z0-9_]*\).*/\1/p' | sort -u
}

# CMake for the GPUs of this machine (native architecture), all cores.
step_build() {
  . "$PF_DEPS_ENV"
  nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DPF_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=native \
    -DPF_GPU_TEST_THREADS=$(( JOBS / 4 > 1 ? JOBS / 4 : 1 )) ${PF_CMAKE_ARGS:-} || return 1
  local targets
  targets=$(gpu_targets) || return 1
  echo "pf_gpu_binaries: $targets"
  cmake --build "$BUILD_DIR" -j "$JOBS" --target pf_gpu_binaries || return 1
  figure "$(nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader | head -1) x $(nvidia-smi -L | wc -l)," \
    "$(echo $targets | wc -w) targets, $JOBS jobs"
}

# A tiny training run in folder $1 on device.backend $2 with device.comm $3:
# 600 protein-like sequences of 60-400 residues from a fixed seed, prepared,
# and a 2-layer model trained for 8 steps on 240-token samples (the sample
# length divides by 1-8 ranks, the chunk by every local length). Exact fp32
# attention (model.attention_math): the runs compare the GPU's losses with the
# CPU's or with other sequence splits, not the tensor cores' rounding.
make_tiny_run() {
  local w=$1 backend=$2 comm=$3
  rm -rf "$w" && mkdir -p "$w" || return 1
  python3 - "$w/synthetic.fasta" <<'PY' || return 1
import random, sys
rng = random.Random(7)
with open(sys.argv[1], "w") as f:
    for i in range(600):
        f.write(f">synthetic_{i}\n" + "".join(rng.choice("ACDEFGHIKLMNPQRSTVWY") for _ in range(rng.randint(60, 400))) + "\n")
PY
  "$(bin performer-data)" prepare --output "$w/synthetic.h5" "$w/synthetic.fasta" || return 1
  cat >"$w/tiny.toml" <<TOML
[model]
layers = 2
width = 64
heads = 4
ffn = 128
features = 32
chunk = 10
attention_math = "fp32"
[data]
files = ["$w/synthetic.h5"]
mode = "concat"
sample_length = 240
batch_size = 2
[optimizer]
lr = 3e-3
warmup_steps = 2
[train]
steps = 8
log_interval = 1
eval_interval = 0
[checkpoint]
dir = ""
[device]
backend = "$backend"
comm = "$comm"
TOML
}

# Trains the tiny run of folder $1 with sp = each argument after the second
# (one rank per sequence slice) and compares the losses with the first's, to
# the relative tolerance $2.
tiny_sp_losses() {
  local w=$1 tol=$2 sp first=""
  shift 2
  for sp in "$@"; do
    mpi -n "$sp" "$(bin performer-train)" --config "$w/tiny.toml" --set parallel.sp="$sp" \
      --set "train.metrics=\"$w/sp$sp.jsonl\"" >"$w/sp$sp.log" 2>&1 || { tail -20 "$w/sp$sp.log"; return 1; }
    grep -m1 'performer-train:' "$w/sp$sp.log"
    [ -n "$first" ] || first=$sp
  done
  shift
  python3 tests/gpu/compare_losses.py "$tol" "$w/sp$first.jsonl" $(for sp in "$@"; do echo "$w/sp$sp.jsonl"; done) |
    tee "$w/compare.txt"
  return "${PIPESTATUS[0]}"
}

# check_limits BUDGET NAME:LIMIT[:gate]...: prints each step's limit and
# their sum, and fails when the sum is over BUDGET seconds.
check_limits() {
  local budget=$1 entry name limit sum=0
  shift
  for entry in "$@"; do
    IFS=: read -r name limit _ <<<"$entry"
    printf '%-11s %4s s\n' "$name" "$limit"
    sum=$((sum + limit))
  done
  echo "sum of the limits: $sum s; budget: $budget s"
  [ "$sum" -le "$budget" ]
}

# summary_table HEADING ROW...: the table of rows NAME|RESULT|TIME|FIGURE.
summary_table() {
  local r a b c d
  echo
  echo "== $1"
  shift
  printf '| %-11s | %-12s | %-6s | %s |\n' step result time "key figure"
  printf '|%s|%s|%s|%s|\n' ------------- -------------- -------- ------------
  for r in "$@"; do
    IFS='|' read -r a b c d <<<"$r"
    printf '| %-11s | %-12s | %-6s | %s |\n' "$a" "$b" "$c" "$d"
  done
}

# run_steps TITLE NAME:LIMIT[:gate]... ; exits 1 unless every step passed.
# With PF_GPU_DEADLINE_S set (run.sh: the call's 590 s), no step runs past
# that many seconds from the start: a step's limit is cut to the time left
# (less 5 s for its kill), and a step with under 5 s left is skipped, so
# the script packs its results before the machine stops the call.
# When a gate step fails (preflight, deps, build), the steps after it are
# not run: each is a row "skipped" naming the gate. The table is written to
# $OUT/summary.md before each step (that step "running") and after it, and
# printed after each step that ran, so that a run stopped from outside
# keeps the rows of the steps that ran and names the one that was running.
run_steps() {
  local title=$1 entry name limit gate t0 rc dt result r i=0 blocked="" printed=1
  shift
  export -f figure bin mpi build_device_probe gpu_targets make_tiny_run tiny_sp_losses \
    $(compgen -A function step_) $(compgen -A function bench_) $(compgen -A function deps_) \
    find_nvcc find_nccl nccl_version missing_deps $(compgen -A function cuda_)
  local t_all rows=()
  t_all=$(date +%s)
  for entry in "$@"; do rows+=("${entry%%:*}|not run yet|-|-"); done
  for entry in "$@"; do
    IFS=: read -r name limit gate <<<"$entry"
    # The limits are the GPU machine's budget (step_limit, for the step's own
    # checks). The dry run gives each step PF_GPU_DRY_LIMIT_SCALE (default 4)
    # times its limit: there the CPU stands in for the GPU, on a machine that
    # may be loaded.
    local step_limit=$limit scale=1 left
    [ "${dry:-0}" = 1 ] && scale=${PF_GPU_DRY_LIMIT_SCALE:-4}
    limit=$((limit * scale))
    if [ -n "${PF_GPU_DEADLINE_S:-}" ]; then
      left=$((PF_GPU_DEADLINE_S * scale - ($(date +%s) - t_all) - 5))
      [ "$left" -ge "$limit" ] || limit=$left
    fi
    rm -f "$OUT/$name.figure"
    local why=""
    if [ -n "$blocked" ]; then
      why="$blocked failed"
    elif [ "$limit" -lt 5 ]; then
      why="no time left of the call's ${PF_GPU_DEADLINE_S}s"
    fi
    if [ -n "$why" ]; then
      echo "== $name: skipped ($why)"
      rows[i]="$name|skipped|0s|not run: $why"
      summary_table "$title, stopped: $why" "${rows[@]}" >"$OUT/summary.md"
      i=$((i + 1)) printed=0
      continue
    fi
    rows[i]="$name|running|-|since $(date +%T), limit ${limit}s"
    summary_table "$title, running $name" "${rows[@]}" >"$OUT/summary.md"
    [ -z "${RESULTS:-}" ] || cp -f "$OUT/summary.md" "$RESULTS/summary.md"
    echo "== $name (limit ${limit}s)"
    t0=$(date +%s)
    # step_left: the seconds this step has (its limit, scaled and cut), for
    # a step that bounds a part of itself to keep time for what follows.
    # No stdin: a command waiting on a terminal would stop in the background.
    step_name=$name step_limit=$step_limit step_left=$limit timeout -k 5 "$limit" bash -c "step_$name" \
      >"$OUT/$name.log" 2>&1 </dev/null
    rc=$?
    dt=$(( $(date +%s) - t0 ))
    case $rc in
      0) result=ok ;;
      124|137) result=TIMEOUT ;;
      *) result="FAILED rc=$rc" ;;
    esac
    [ "$rc" = 0 ] || tail -15 "$OUT/$name.log"
    [ "$rc" = 0 ] || [ "$gate" != gate ] || blocked=$name
    rows[i]="$name|$result|${dt}s|$(cat "$OUT/$name.figure" 2>/dev/null || echo -)"
    summary_table "$title, after $name, $(( $(date +%s) - t_all ))s so far, logs in $OUT" "${rows[@]}" |
      tee "$OUT/summary.md"
    i=$((i + 1)) printed=1
    pack_results "${RESULTS:-}"
  done
  summary_table "$title, $(( $(date +%s) - t_all ))s in all, logs in $OUT" "${rows[@]}" >"$OUT/summary.md"
  [ "$printed" = 1 ] || cat "$OUT/summary.md"
  pack_results "${RESULTS:-}"
  for r in "${rows[@]}"; do
    IFS='|' read -r _ result _ _ <<<"$r"
    [ "$result" = ok ] || return 1
  done
}
