#!/usr/bin/env python3
"""Checks of launch/studies/indelible_families.py on real roots (CMakeLists.txt
of this folder says what). The identity is measured here with code of its own,
not the script's.
  indelible_families_checks.py GENERATOR ROOTS.fasta.gz WORKDIR
"""
import filecmp
import gzip
import os
import subprocess
import sys
import time

FAMILIES, MEMBERS, MIN_LEN, MAX_LEN = 12, 4, 80, 200
TOLERANCE = 0.01  # asked of the generator, and checked here on its alignment


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def fasta(path):
    opener = gzip.open if path.endswith(".gz") else open
    out = []
    with opener(path, "rt") as f:
        for line in f:
            line = line.strip()
            if line.startswith(">"):
                out.append([line[1:], ""])
            elif line:
                out[-1][1] += line
    return out


def run(gen, args, want_rc=0):
    t = time.time()
    r = subprocess.run([sys.executable, gen] + args, capture_output=True, text=True)
    if r.returncode != want_rc:
        fail(f"{' '.join(args)}: exit {r.returncode}, want {want_rc}\n{r.stdout}{r.stderr}")
    print(f"  {time.time() - t:5.1f} s  {' '.join(args[1:])}")
    return r


def same_tree(a, b):
    names = sorted(os.listdir(a))
    if names != sorted(os.listdir(b)):
        return False
    return all(filecmp.cmp(os.path.join(a, n), os.path.join(b, n), shallow=False) for n in names)


def tree_line(control):
    with open(control) as f:
        return next(line for line in f if line.startswith("[TREE]"))


def check_identity(out, target, roots_by_id):
    tag = f"id{target:.2f}"
    aln = fasta(os.path.join(out, tag + ".aln.fasta"))
    members = fasta(os.path.join(out, tag + ".fasta"))
    if len(aln) != FAMILIES * (MEMBERS + 1) or len(members) != FAMILIES * MEMBERS:
        fail(f"{tag}: {len(aln)} alignment rows and {len(members)} members for {FAMILIES} x {MEMBERS}")
    same = aligned = 0
    expect_members = []
    for f in range(FAMILIES):
        block = aln[f * (MEMBERS + 1):(f + 1) * (MEMBERS + 1)]
        head, root_row = block[0]
        name, root_id = head.split()
        if name != f"fam{f}_root":
            fail(f"{tag}: row '{head}' where fam{f}_root belongs")
        root = root_row.replace("-", "")
        if roots_by_id.get(root_id) != root:
            fail(f"{tag}: fam{f}'s root row is not the protein {root_id} of the roots file")
        if not MIN_LEN <= len(root) <= MAX_LEN:
            fail(f"{tag}: root {root_id} has {len(root)} residues, outside {MIN_LEN}-{MAX_LEN}")
        width = len(root_row)
        for k, (h, row) in enumerate(block[1:]):
            if h != f"fam{f}_m{k}" or len(row) != width:
                fail(f"{tag}: row '{h}' of length {len(row)} where fam{f}_m{k} of length {width} belongs")
            if set(row) - set("ACDEFGHIKLMNPQRSTVWY-"):
                fail(f"{tag}: {h} holds {sorted(set(row) - set('ACDEFGHIKLMNPQRSTVWY-'))}")
            for x, y in zip(root_row, row):
                if x != "-" and y != "-":
                    aligned += 1
                    same += x == y
            expect_members.append([h, row.replace("-", "")])
        if any(all(row[c] == "-" for _, row in block) for c in range(width)):
            fail(f"{tag}: fam{f} has a column of gaps only")
    if members != expect_members:
        fail(f"{tag}.fasta is not the alignment's member rows with the gaps removed")
    with open(os.path.join(out, tag + ".families.tsv")) as f:
        table = [line.rstrip("\n").split("\t") for line in f]
    if table != [[h, h.split("_")[0]] for h, _ in expect_members]:
        fail(f"{tag}.families.tsv is not one 'fam<f>_m<k><TAB>fam<f>' line per member, in order")
    achieved = same / aligned
    if abs(achieved - target) > TOLERANCE:
        fail(f"{tag}: identity to the root {achieved:.4f} on the true alignment, asked {target} +- {TOLERANCE}")
    summary = {}
    with open(os.path.join(out, "summary.tsv")) as f:
        cols = f.readline().rstrip("\n").split("\t")
        for line in f:
            row = dict(zip(cols, line.rstrip("\n").split("\t")))
            summary[row["identity_requested"]] = row
    reported = float(summary[f"{target:.4f}"]["identity_achieved"])
    if abs(reported - achieved) > 1e-4:
        fail(f"{tag}: summary.tsv reports identity {reported}, the alignment gives {achieved:.4f}")
    print(f"  {out}/{tag}: identity to the root {achieved:.4f} (asked {target}), {aligned} aligned pairs")
    return achieved


def main():
    gen, roots_path, work = sys.argv[1:4]
    roots_by_id = {h.split()[0]: s for h, s in fasta(roots_path)}
    common = ["--families", str(FAMILIES), "--members", str(MEMBERS), "--min-length", str(MIN_LEN),
              "--max-length", str(MAX_LEN), "--tolerance", str(TOLERANCE)]
    a, b, c, d = (os.path.join(work, x) for x in ("a", "b", "c", "d"))
    t0 = time.time()
    run(gen, [roots_path, a, "--identity", "0.9", "0.5", "--seed", "1"] + common)
    run(gen, [roots_path, b, "--identity", "0.9", "0.5", "--seed", "1"] + common)
    run(gen, [roots_path, c, "--identity", "0.9", "0.5", "--seed", "2"] + common)
    run(gen, [roots_path, d, "--identity", "0.7", "--seed", "1", "--tree", "balanced", "--model", "LG"] + common)
    if not same_tree(a, b):
        fail("two runs with seed 1 wrote different files")
    for name in ("id0.90.fasta", "id0.50.fasta", "id0.90.aln.fasta"):
        if filecmp.cmp(os.path.join(a, name), os.path.join(c, name), shallow=False):
            fail(f"seeds 1 and 2 wrote the same {name}")
    print("  seed 1 twice: byte-identical; seed 2: other families")
    for out in (a, c):
        for target in (0.9, 0.5):
            check_identity(out, target, roots_by_id)
    check_identity(d, 0.7, roots_by_id)
    trees = [tree_line(os.path.join(d, "id0.70.control.txt")), tree_line(os.path.join(a, "id0.90.control.txt"))]
    if "((" not in trees[0] or "((" in trees[1]:
        fail(f"--tree balanced should nest clades and the star not: {trees}")

    # Refusals: each names its argument and writes nothing.
    r = run(gen, [roots_path, a] + common, want_rc=2)
    if "exists" not in r.stderr:
        fail(f"an existing output folder: {r.stderr}")
    for args, rc, text in (([roots_path, os.path.join(work, "e"), "--identity", "1.5"], 2, "--identity 1.5"),
                           ([roots_path, os.path.join(work, "e"), "--members", "1"], 2, "--members 1"),
                           ([os.path.join(work, "none.fa"), os.path.join(work, "e")], 1, "none.fa"),
                           ([roots_path, os.path.join(work, "e"), "--families", "100000"], 1, "--families 100000"),
                           ([roots_path, os.path.join(work, "e"), "--indelible", os.path.join(work, "no-indelible")],
                            1, "not found")):
        r = run(gen, args, want_rc=rc)
        if text not in r.stderr:
            fail(f"{' '.join(args)}: message does not name '{text}': {r.stderr}")
    if os.path.exists(os.path.join(work, "e")) or [n for n in os.listdir(work) if n.startswith(".")]:
        fail(f"a refused run left files in {work}: {os.listdir(work)}")
    print(f"PASS: indelible_families.py reproducible, on target identity +- {TOLERANCE}, "
          f"members = alignment without gaps ({time.time() - t0:.1f} s)")


if __name__ == "__main__":
    main()
