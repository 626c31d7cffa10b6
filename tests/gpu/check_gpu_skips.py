#!/usr/bin/env python3
"""Reads the output of `ctest -L gpu` and fails unless every entry passed or
was skipped because it needs more GPUs than the machine has, so that the GPU
script's test step cannot pass where the GPU tests did not run.

    check_gpu_skips.py CTEST_OUTPUT GPUS

An entry needs one GPU, except test_comm_nccl.npN, which needs N (NCCL takes
one GPU per rank: enough_gpus() in tests/comm/test_comm_device.cc). With
GPUS = 0 (the dry run on the CPU) every entry may skip; with one or more, at
least one entry must pass. Prints one line of counts, naming the entries that
failed or were skipped, and exits 1 when the rule is broken.
"""
import re
import sys

# "12/20 Test #7: test_model_gpu .....***Skipped   0.01 sec", also with -j.
RESULT = re.compile(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) \.*\s*(?:\*\*\*)?(.+?)\s+[0-9.]+ sec\s*$")
ONE_GPU_PER_RANK = re.compile(r"^test_comm_nccl\.np(\d+)$")
SKIPPED = ("Skipped", "Not Run (Disabled)")


def gpus_needed(name):
    m = ONE_GPU_PER_RANK.match(name)
    return int(m.group(1)) if m else 1


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    path, gpus = sys.argv[1], int(sys.argv[2])
    results = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = RESULT.match(line)
            if m:
                results[m.group(1)] = m.group(2)
    if not results:
        print(f"check_gpu_skips: no ctest results in {path}: nothing ran")
        return 1
    passed = sorted(n for n, s in results.items() if s == "Passed")
    skipped = sorted(n for n, s in results.items() if s in SKIPPED)
    failed = sorted(f"{n} ({s})" for n, s in results.items() if s != "Passed" and s not in SKIPPED)
    allowed = [n for n in skipped if gpus_needed(n) > gpus]
    unexpected = [n for n in skipped if gpus_needed(n) <= gpus]
    problems = []
    if failed:
        problems.append(f"failed: {', '.join(failed)}")
    if unexpected:
        problems.append(f"skipped with {gpus} GPU(s) enough to run them: {', '.join(unexpected)}")
    if gpus > 0 and not passed:
        problems.append("no entry passed")
    line = f"{len(passed)} of {len(results)} gpu entries passed, {len(skipped)} skipped"
    if gpus == 0:
        line += " (no GPU: every entry may skip)"
    elif allowed:
        line += f" (needing more than {gpus} GPU(s): {', '.join(allowed)})"
    print("check_gpu_skips: " + line + ("; " + "; ".join(problems) if problems else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
