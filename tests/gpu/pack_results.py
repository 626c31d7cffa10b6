#!/usr/bin/env python3
"""Packs a GPU script run (tests/gpu/run.sh --results DIR; lib.sh's
pack_results calls it after each step) into the few files that the remote GPU
machine hands back (at most 8 files of at most 16 MiB each):

    DIR/summary.md       the table, as OUT/summary.md holds it now
    DIR/gpu-run.tar.gz   every file under OUT (as BASE/...; BASE the name of
                         OUT) of at most 1 MiB; of a larger one its first
                         256 KiB as FILE.head (a build's first error) and
                         its last 1 MiB as FILE.tail; without the peers' installed
                         packages (OUT/peers-site) and the profile's report.
                         BASE/left_out.txt names what was cut or left out
    DIR/profile.ncu-rep  OUT/profile.ncu-rep when it is at most 16 MiB

The archive is written beside its place and renamed, so a call stopped
while it packs still leaves the previous one.

    pack_results.py OUT DIR
"""
import io
import os
import shutil
import sys
import tarfile

from check_results import MAX_BYTES  # what the machine hands back, per file

PER_FILE = 1 << 20  # what the pack keeps of one file: all of it up to this, else its tail
HEAD = 1 << 18  # and, of a larger one, its head too
SKIPPED_DIRS = {"peers-site"}
REPORT = "profile.ncu-rep"


def add_bytes(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def pack(out, dest):
    out = os.path.abspath(out)
    base = os.path.basename(out)
    os.makedirs(dest, exist_ok=True)
    notes = []
    part = os.path.join(dest, "gpu-run.tar.gz.part")
    with tarfile.open(part, "w:gz") as tar:
        for root, dirs, files in os.walk(out):
            if root == out:
                dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, out)
                if rel in (REPORT, "left_out.txt") or os.path.islink(path) or not os.path.isfile(path):
                    continue
                size = os.path.getsize(path)
                if size <= PER_FILE:
                    tar.add(path, f"{base}/{rel}", recursive=False)
                    continue
                with open(path, "rb") as f:
                    add_bytes(tar, f"{base}/{rel}.head", f.read(HEAD))
                    f.seek(size - PER_FILE)
                    add_bytes(tar, f"{base}/{rel}.tail", f.read())
                notes.append(f"{rel}: {size} bytes; its first {HEAD} bytes as {rel}.head, its last {PER_FILE} as "
                             f"{rel}.tail")
        report = os.path.join(out, REPORT)
        if os.path.isfile(report):
            size = os.path.getsize(report)
            if size <= MAX_BYTES:
                shutil.copyfile(report, os.path.join(dest, REPORT) + ".part")
                os.replace(os.path.join(dest, REPORT) + ".part", os.path.join(dest, REPORT))
            else:
                notes.append(f"{REPORT}: {size} bytes, over the {MAX_BYTES} the remote machine hands back; not packed")
        text = "\n".join(notes) + "\n" if notes else "nothing left out\n"
        with open(os.path.join(out, "left_out.txt"), "w") as f:
            f.write(text)
        add_bytes(tar, f"{base}/left_out.txt", text.encode())
    size = os.path.getsize(part)
    if size > MAX_BYTES:
        print(f"pack_results: gpu-run.tar.gz has {size} bytes, over the {MAX_BYTES} the remote machine hands back",
              file=sys.stderr)
    os.replace(part, os.path.join(dest, "gpu-run.tar.gz"))
    summary = os.path.join(out, "summary.md")
    if os.path.isfile(summary):
        shutil.copyfile(summary, os.path.join(dest, "summary.md"))
    return size <= MAX_BYTES


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(0 if pack(sys.argv[1], sys.argv[2]) else 1)


if __name__ == "__main__":
    main()
