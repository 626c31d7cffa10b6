#!/usr/bin/env python3
"""Checks of launch/studies/aligned_copy.py without a model (CMakeLists.txt of
this folder says what): a hand-made alignment whose classes are written out
below, and fake_score.py, whose log-probabilities are known by construction.
  aligned_copy_checks.py STUDIES_DIR WORKDIR
"""
import csv
import math
import os
import stat
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import fake_score  # noqa: E402

# Columns:         012345678
ALIGNMENT = """\
>fam0_root P1
MKV-LAGT-
>fam0_m0
MKVQLA-T-
>fam0_m1
MRV-LSGT-
>fam0_m2
-KAQL-GSW
>fam1_root P2
ACDE
>fam1_m0
AC-E
>fam1_m1
A-DF
>fam2_root P3
MK
>fam2_m0
MR
"""
# The last member of each family of two or more, residue by residue, against
# the earlier members' column: fam0_m2 K(K,R) A(V,V) Q(Q,-) L(L,L) G(-,G)
# S(T,T) W(-,-); fam1_m1 A(A) D(-) F(E). fam2 has no earlier member.
EXPECTED = {
    "fam0_m2": ("KAQLGSW", ["copyable", "substituted", "copyable", "copyable", "copyable", "substituted",
                            "unaligned"]),
    "fam1_m1": ("ADF", ["copyable", "unaligned", "substituted"]),
}


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def expected_rows(only=None):
    """category -> (count, mean lp ctx, mean p ctx, mean lp alone, mean p alone,
    accuracy ctx, accuracy alone) by construction, over the families in `only`
    (all when None)."""
    acc = {}

    def add(key, seq, i):
        acc.setdefault(key, []).append((fake_score.given_logprob(seq, i), fake_score.alone_logprob(seq, i),
                                        fake_score.given_top(seq, i), fake_score.alone_top(seq, i)))

    for name, (seq, classes) in EXPECTED.items():
        if only is not None and name.split("_")[0] not in only:
            continue
        for i, cls in enumerate(classes):
            if math.isnan(fake_score.alone_logprob(seq, i)):
                add("first_residue", seq, i)
                continue
            add(cls, seq, i)
            if cls != "copyable":
                add("not_copyable", seq, i)
            add("all_residues", seq, i)
        add("end", seq, len(seq))
    out = {}
    for key, v in acc.items():
        k = len(v)
        out[key] = tuple([k] + [sum(f(x[j]) for x in v) / k
                                for j, f in ((0, float), (0, math.exp), (1, float), (1, math.exp), (2, float),
                                             (3, float))])
    return out


def check_csv(path, want):
    """Fails unless the CSV at `path` holds exactly `want`'s rows and values; returns `want`."""
    with open(path) as f:
        rows = {row["category"]: row for row in csv.DictReader(f)}
    if set(rows) != set(want):
        fail(f"CSV rows {sorted(rows)}, want {sorted(want)}")
    counted = want["all_residues"][0]
    for key, (n, lc, pc, la, pa, tc, ta) in want.items():
        row = rows[key]
        values = [("residues", int(row["residues"]), n), ("logprob_context", float(row["logprob_context"]), lc),
                  ("prob_context", float(row["prob_context"]), pc),
                  ("accuracy_context", float(row["accuracy_context"]), tc)]
        if key != "first_residue":
            values += [("logprob_alone", float(row["logprob_alone"]), la),
                       ("prob_alone", float(row["prob_alone"]), pa),
                       ("gain_nats", float(row["gain_nats"]), lc - la),
                       ("accuracy_alone", float(row["accuracy_alone"]), ta)]
        if key not in ("first_residue", "end"):
            values.append(("fraction", float(row["fraction"]), n / counted))
        for col, value, expect in values:
            if abs(value - expect) > 1e-5:
                fail(f"{key} {col} = {value}, want {expect:.6f}")
    return want


def main():
    studies, work = sys.argv[1:3]
    sys.path.insert(0, studies)
    import aligned_copy
    import indelible_families

    aln = os.path.join(work, "id0.90.aln.fasta")
    members = os.path.join(work, "id0.90.fasta")
    with open(aln, "w") as f:
        f.write(ALIGNMENT)
    blocks = indelible_families.read_alignment(aln)
    with open(members, "w") as f:
        for fam, rows in blocks.items():
            for m, row in rows[1:]:
                f.write(f">{fam}_{m}\n{row.replace('-', '')}\n")

    # The classes, straight and through the reader.
    families = aligned_copy.families_and_queries(members, aln, 0)
    got = {name: (seq, classes) for _, _, name, seq, classes in families}
    if got != EXPECTED:
        fail(f"copy classes {got}, want {EXPECTED}")
    if [ctx for _, ctx, _, _, _ in families] != [["MKVQLAT", "MRVLSGT"], ["ACE"]]:
        fail(f"contexts {[ctx for _, ctx, _, _, _ in families]}")
    print("  classes of the hand-made alignment as written; fam2 (one member) left out")

    # A member that is not its alignment row without gaps is refused, by name.
    bad = os.path.join(work, "bad.fasta")
    with open(members) as f, open(bad, "w") as g:
        g.write(f.read().replace("ADF", "ADY"))
    try:
        aligned_copy.families_and_queries(bad, aln, 0)
        fail("a member that differs from its alignment row was accepted")
    except indelible_families.Failure as e:
        if "fam1_m1" not in str(e):
            fail(f"the refusal does not name fam1_m1: {e}")

    # The whole script against the stand-in tool.
    tool = os.path.join(work, "performer-score")
    with open(tool, "w") as f:
        f.write(f"#!/bin/sh\nexec '{sys.executable}' '{os.path.join(here, 'fake_score.py')}' \"$@\"\n")
    os.chmod(tool, os.stat(tool).st_mode | stat.S_IXUSR)
    ckpt = os.path.join(work, "ckpt.h5")
    open(ckpt, "w").close()
    out = os.path.join(work, "copy.csv")
    cmd = [sys.executable, os.path.join(studies, "aligned_copy.py"), "--score", tool, "--checkpoint", ckpt,
           "--families", members, "--alignment", aln, "--output", out, "--set", "model.features=8"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"aligned_copy.py exited {r.returncode}: {r.stdout}{r.stderr}")
    want = check_csv(out, expected_rows())
    print(f"  CSV of {len(want)} rows equals the means and accuracies by construction "
          f"(copyable {want['copyable'][0]}, not copyable {want['not_copyable'][0]} residues)")

    # --split: only the families with a member in that split of a prepared file.
    import h5py
    data = os.path.join(work, "data.h5")
    with h5py.File(data, "w") as h:
        h.create_dataset("test/ids", data=["fam1_m0", "fam1_m1"], dtype=h5py.string_dtype())
        h.create_dataset("train/ids", data=["fam0_m0", "fam0_m1", "fam0_m2", "fam2_m0"], dtype=h5py.string_dtype())
    r = subprocess.run(cmd + ["--split", data + ":test", "--output", out], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"aligned_copy.py --split exited {r.returncode}: {r.stdout}{r.stderr}")
    want = check_csv(out, expected_rows({"fam1"}))
    r = subprocess.run(cmd + ["--split", data + ":valid", "--output", out], capture_output=True, text=True)
    if r.returncode != 1 or "no split 'valid'" not in r.stderr:
        fail(f"--split of a missing split: exit {r.returncode}, {r.stderr}")
    print(f"  --split {os.path.basename(data)}:test keeps fam1 only ({want['all_residues'][0]} residues); "
          "a missing split is named")

    # copy_by_divergence.sh: every run on every identity file, one CSV of all
    # (run, identity, then aligned_copy.py's columns); a CSV that exists is kept.
    by = os.path.join(work, "by")
    env = dict(os.environ, SCORE=tool, PYTHON=sys.executable)
    driver = ["bash", os.path.join(studies, "copy_by_divergence.sh"), by, data + ":test", work,
              f"first={ckpt}", f"second={ckpt}"]
    r = subprocess.run(driver, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        fail(f"copy_by_divergence.sh exited {r.returncode}: {r.stdout}{r.stderr}")
    with open(os.path.join(by, "copy_by_divergence.csv")) as f:
        table = list(csv.DictReader(f))
    runs = sorted({(row["run"], row["identity"]) for row in table})
    if runs != [("first", "0.90"), ("second", "0.90")]:
        fail(f"copy_by_divergence.csv holds runs {runs}, want first and second at 0.90")
    for run in ("first", "second"):
        part = os.path.join(work, f"{run}.csv")
        with open(part, "w") as f:
            f.write(",".join(k for k in table[0] if k not in ("run", "identity")) + "\n")
            for row in table:
                if row["run"] == run:
                    f.write(",".join(v for k, v in row.items() if k not in ("run", "identity")) + "\n")
        check_csv(part, want)
    kept = os.path.join(by, "copy_first_id0.90.csv")
    with open(kept, "a") as f:
        f.write("marker,1,,,,,,,,\n")
    r = subprocess.run(driver, capture_output=True, text=True, env=env)
    with open(os.path.join(by, "copy_by_divergence.csv")) as f:
        if r.returncode != 0 or "first,0.90,marker" not in f.read():
            fail(f"a second copy_by_divergence.sh recomputed an existing CSV or failed: {r.returncode} {r.stderr}")
    print("  copy_by_divergence.sh: both runs at 0.90 in one CSV, each equal to aligned_copy.py's; "
          "existing CSVs kept")

    # Per-residue values that do not sum to the tool's total are refused.
    r = subprocess.run(cmd[:-4] + ["--output", os.path.join(work, "bad.csv")], capture_output=True, text=True,
                       env=dict(os.environ, FAKE_SCORE_BAD="1"))
    if r.returncode != 1 or "sum to" not in r.stderr or os.path.exists(os.path.join(work, "bad.csv")):
        fail(f"a per-residue file off the tool's total: exit {r.returncode}, {r.stderr}")
    print("PASS: aligned_copy.py classes, means and total checks")


if __name__ == "__main__":
    main()
