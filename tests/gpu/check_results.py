#!/usr/bin/env python3
"""Checks a GPU script's results folder (tests/gpu/run.sh --results DIR)
against what the remote GPU machine hands back: at most 8 files, each at most
16 MiB, no deeper than 2 folders, named in letters, digits, '.', '_' and '-'.
Then that the pack holds the run: summary.md beside gpu-run.tar.gz, which
holds left_out.txt and the log of every step that ran. Its summary.md is
the same table, unless a step was running when the run was stopped (the
loose table names that step, the packed one is from before it).

    check_results.py DIR
"""
import os
import re
import sys
import tarfile

MAX_FILES = 8
MAX_BYTES = 16 << 20
MAX_DEPTH = 2  # DIR/a/b/file comes back, DIR/a/b/c/file does not
NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def lease_problems(root):
    problems, files = [], []
    for folder, dirs, names in os.walk(root):
        rel = os.path.relpath(folder, root)
        parts = [] if rel == "." else rel.split(os.sep)
        for part in parts:
            if not NAME.match(part):
                problems.append(f"folder name {part!r} has characters outside [A-Za-z0-9._-]")
        for name in names:
            path = os.path.join(folder, name)
            shown = os.path.join(*parts, name) if parts else name
            files.append(shown)
            if len(parts) > MAX_DEPTH:
                problems.append(f"{shown} is {len(parts)} folders down (at most {MAX_DEPTH})")
            if not NAME.match(name):
                problems.append(f"{shown}: name has characters outside [A-Za-z0-9._-]")
            if os.path.islink(path) or not os.path.isfile(path):
                problems.append(f"{shown} is not a plain file")
            elif os.path.getsize(path) > MAX_BYTES:
                problems.append(f"{shown} has {os.path.getsize(path)} bytes (at most {MAX_BYTES})")
    if len(files) > MAX_FILES:
        problems.append(f"{len(files)} files (at most {MAX_FILES}): {', '.join(sorted(files))}")
    return problems, files


def step_names(summary):
    """The step names of the table's rows (| name | result | time | figure |)."""
    names = []
    for line in summary.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] not in ("step", "") and not set(cells[0]) <= set("-"):
            names.append((cells[0], cells[1]))
    return names


def pack_problems(root):
    problems = []
    summary_path = os.path.join(root, "summary.md")
    pack_path = os.path.join(root, "gpu-run.tar.gz")
    for path in (summary_path, pack_path):
        if not os.path.isfile(path):
            problems.append(f"no {os.path.basename(path)}")
    if problems:
        return problems
    with open(summary_path) as f:
        summary = f.read()
    with tarfile.open(pack_path) as tar:
        members = {m.name.split("/", 1)[1]: m for m in tar.getmembers() if m.isfile() and "/" in m.name}
        if "summary.md" not in members:
            return ["gpu-run.tar.gz holds no summary.md"]
        packed_summary = tar.extractfile(members["summary.md"]).read().decode()
    steps = step_names(summary)
    stopped = any(result == "running" for _, result in steps)
    if packed_summary != summary and not stopped:
        problems.append("summary.md differs from the one in gpu-run.tar.gz")
    if "left_out.txt" not in members:
        problems.append("gpu-run.tar.gz holds no left_out.txt")
    if not steps:
        problems.append("summary.md names no step")
    for name, result in steps:
        if result in ("skipped", "not run yet", "running"):
            continue
        if f"{name}.log" not in members and f"{name}.log.tail" not in members:
            problems.append(f"gpu-run.tar.gz holds no {name}.log for the step {name} ({result})")
    if any(name.startswith("peers-site/") for name in members):
        problems.append("gpu-run.tar.gz holds the peers' installed packages")
    return problems


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    problems, files = lease_problems(root)
    problems += pack_problems(root)
    for p in problems:
        print(f"check_results: {p}")
    if problems:
        sys.exit(1)
    print(f"check_results: {len(files)} files in {root} ({', '.join(sorted(files))}), within what a GPU machine "
          "hands back; the pack holds the table and every step's log")


if __name__ == "__main__":
    main()
