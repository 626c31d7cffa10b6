"""Shared helpers of the peer benchmarks (attention.py, train_step.py; seconds_of
also for gpu_attention.py and gpu_train_step.py).

Each benchmark runs one case per process, so that ru_maxrss is that case's
peak; the process also measures the peer side's sgemm (a torch fp32 matmul,
2048^3, best of 3) after the case, with the same threads and BLAS.
"""
import ctypes
import os
import resource
import sys
import time

INSTALL_HINT = "run launch/bench/peers/install.sh first (then use the python of its venv, .peers/venv/bin/python)"


def die(msg):
    print(f"{os.path.basename(sys.argv[0])}: {msg}", file=sys.stderr)
    sys.exit(2)


def import_torch(threads):
    """Imports torch (Debian's, through the peers' venv) with `threads` threads."""
    try:
        import torch
    except ImportError as e:
        die(f"cannot import torch ({e}); {INSTALL_HINT}")
    torch.set_num_threads(threads)
    torch.set_grad_enabled(True)
    return torch


def default_threads():
    return int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1)


def blas_core():
    """The OpenBLAS kernel set in use ('Haswell', 'SkylakeX', 'Prescott', ...), or '?'."""
    for lib in ("libblas.so.3", "libopenblas.so.0"):
        try:
            f = ctypes.CDLL(lib).openblas_get_corename
        except (OSError, AttributeError):
            continue
        f.restype = ctypes.c_char_p
        return f().decode()
    return "?"


def check_blas_core():
    core = blas_core()
    if core.lower() in ("prescott", "core2", "nehalem") and "OPENBLAS_CORETYPE" not in os.environ:
        print(f"{os.path.basename(sys.argv[0])}: warning: OpenBLAS uses its {core} kernels; set OPENBLAS_CORETYPE "
              "(run.sh does) or torch's GEMMs run several times slower than this CPU can", file=sys.stderr)
    return core


def sgemm_gflops(torch, n=2048, reps=3):
    a = torch.full((n, n), 0.5)
    b = torch.full((n, n), 0.25)
    c = torch.empty(n, n)
    torch.mm(a, b, out=c)  # warm-up
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        torch.mm(a, b, out=c)
        best = min(best, time.perf_counter() - t)
    return 2.0 * n ** 3 / best * 1e-9


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def current_rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def best_of(step, reps, warmup):
    """Runs step() `warmup` times untimed, then `reps` times; step returns a tuple
    of partial times whose sum is the total. Returns the tuple of the best total."""
    for _ in range(warmup):
        step()
    best = None
    for _ in range(reps):
        parts = step()
        if best is None or sum(parts) < sum(best):
            best = parts
    return best


if __name__ == "__main__" and sys.argv[1:] == ["versions"]:  # run.sh's machine description
    from importlib.metadata import version
    import torch
    print(f"torch {torch.__version__} ({os.path.dirname(torch.__file__)}), performer-pytorch "
          f"{version('performer-pytorch')}, pytorch-fast-transformers {version('pytorch-fast-transformers')}, "
          f"OpenBLAS core {blas_core()}")


def seconds_of(torch, cuda, fn):
    """Seconds fn() took: between CUDA events recorded around it on a GPU
    (the device's time, fn's work included), by the host clock otherwise."""
    if cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e-3
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0
