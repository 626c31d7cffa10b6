#!/usr/bin/env python3
"""How well a checkpoint predicts a residue that its relatives show at the
same aligned position: for each family of indelible_families.py's output,
the last member (the query) is scored with performer-score given the earlier
members as its context (`--context`, in their order) and alone, and its
residues are split by the family's true alignment into
  copyable     an earlier member holds the same residue in that column;
  substituted  an earlier member holds a residue there, none the same one;
  unaligned    every earlier member has a gap there (an insertion on the
               query's side, or a deletion in every relative).
`not_copyable` is substituted + unaligned. Per class the table gives the
residues, the mean log-probability of the true residue (nats), its mean
probability and the accuracy (the fraction of residues whose true token has
the largest logit, performer-score's /top), given the context and alone, and
the gain (mean of the log-probabilities' difference). A residue counts when both runs score it: alone, a checkpoint
trained packed, single or family (`--first-residue auto`) does not score a
protein's first residue, which the row `first_residue` gives, with the
context only; the row `end` is the closing <end>.

  aligned_copy.py --score BIN/performer-score --checkpoint CKPT \
      --families OUT/id0.90.fasta --alignment OUT/id0.90.aln.fasta \
      --output copy.csv [--max-families 20] [--split DATA.h5:test] [--set key=value ...] [--work DIR]

--split keeps the families with a member in that split of a prepared file
(its `ids`, >fam<f>_m<k> as the generator names them): the held-out families
of a model trained on that file, at the file's identity or at another
identity generated from the same roots (family f has the same root at every
identity of one generator run).

performer-score runs once alone over all queries and once per family with
its context. Slot i of a query's per-residue log-probabilities is residue
i + 1 (1-based) and the last slot its <end> (launch/infer/score_output.h).
The script checks that the per-residue sums give the tool's totals
(log_likelihood, and alone_log_likelihood of the --context run against the
alone run) before it counts anything.

CSV columns: category, residues, fraction (of the residues counted),
logprob_context, prob_context, logprob_alone, prob_alone, gain_nats,
accuracy_context, accuracy_alone.
"""
import argparse
import math
import os
import shlex
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from indelible_families import Failure, copy_classes, family_of, read_alignment, read_fasta  # noqa: E402

PROG = "aligned_copy.py"
CLASSES = ["copyable", "not_copyable", "substituted", "unaligned", "all_residues"]


def split_families(spec):
    """The families (fam<f>) with a member in split SPLIT of DATA.h5, from "DATA.h5:SPLIT"."""
    path, _, split = spec.rpartition(":")
    if not path or not split:
        raise Failure(f"--split {spec}: expected DATA.h5:SPLIT, e.g. ind70.h5:test")
    import h5py
    try:
        with h5py.File(path, "r") as h:
            if f"{split}/ids" not in h:
                raise Failure(f"--split {spec}: {path} has no split '{split}' (no dataset {split}/ids)")
            names = [x.decode() if isinstance(x, bytes) else str(x) for x in h[f"{split}/ids"][...]]
    except OSError as e:
        raise Failure(f"--split {spec}: cannot read {path}: {e}") from None
    out = set()
    for name in names:
        try:
            out.add(family_of(name)[0])
        except ValueError:
            raise Failure(f"--split {spec}: id '{name}' of {path} is not fam<f>_m<k>") from None
    return out


def families_and_queries(fasta_path, aln_path, max_families, only=None):
    """[(family, [earlier member sequences], query name, query sequence,
    classes of the query's residues)] for every family of two or more members
    (only those in `only`, a set of family names, when given)."""
    members = {}
    for header, seq in read_fasta(fasta_path):
        name = header.split()[0] if header else ""
        try:
            fam, _ = family_of(name)
        except ValueError:
            raise Failure(f"{fasta_path}: header '>{header}' is not >fam<f>_m<k>") from None
        members.setdefault(fam, []).append((name, seq))
    if not members:
        raise Failure(f"{fasta_path}: no FASTA records")
    blocks = read_alignment(aln_path)
    out = []
    for fam, recs in members.items():
        if only is not None and fam not in only:
            continue
        if fam not in blocks:
            raise Failure(f"{aln_path}: no alignment of family {fam} of {fasta_path}")
        rows = blocks[fam][1:]  # without the root
        if [f"{fam}_{m}" for m, _ in rows] != [n for n, _ in recs]:
            raise Failure(f"{aln_path}: the members of {fam} are not those of {fasta_path}, in its order")
        for (name, seq), (_, row) in zip(recs, rows):
            if row.replace("-", "") != seq:
                raise Failure(f"{name}: its row in {aln_path} without gaps is not its sequence in {fasta_path}")
        if len(recs) < 2:
            continue
        query_name, query_seq = recs[-1]
        classes = copy_classes([r for _, r in rows[:-1]], rows[-1][1])
        out.append((fam, [s for _, s in recs[:-1]], query_name, query_seq, classes))
        if max_families and len(out) == max_families:
            break
    if not out:
        raise Failure(f"{fasta_path}: no family of two or more members"
                      + (f" among the {len(only)} families of the split" if only is not None else ""))
    return out


def write_fasta(path, records):
    with open(path, "w") as f:
        for name, seq in records:
            f.write(f">{name}\n{seq}\n")


def read_table(path):
    with open(path) as f:
        lines = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    return [dict(zip(lines[0], row)) for row in lines[1:]]


def read_per_residue(path):
    import h5py
    with h5py.File(path, "r") as h:
        ids = [x.decode() if isinstance(x, bytes) else str(x) for x in h["ids"][...]]
        if "top" not in h:
            raise Failure(f"{path}: no /top dataset (a performer-score that predates it)")
        lengths, offsets, logprob, top = h["lengths"][...], h["offsets"][...], h["logprob"][...], h["top"][...]
    if len(offsets) != len(ids) + 1 or len(lengths) != len(ids) or offsets[-1] != len(logprob) \
            or len(top) != len(logprob):
        raise Failure(f"{path}: ids, lengths, offsets, logprob and top disagree in size")
    per = {}
    for i, name in enumerate(ids):
        lp, tp = logprob[offsets[i]:offsets[i + 1]], top[offsets[i]:offsets[i + 1]]
        if len(lp) != lengths[i] + 1:
            raise Failure(f"{path}: {name} has {len(lp)} values for {lengths[i]} residues (want n + 1)")
        per[name] = (lp, tp)
    return per


def run_score(a, args, log):
    cmd = [a.score, "--checkpoint", a.checkpoint] + [x for kv in a.set for x in ("--set", kv)] + args
    r = subprocess.run(cmd, capture_output=True, text=True)
    log.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n" + r.stderr)
    if r.returncode != 0:
        raise Failure(f"{' '.join(shlex.quote(c) for c in cmd)} exited with status {r.returncode}:\n"
                      f"{r.stderr.strip()[-2000:]}")


def close(x, y):
    return abs(x - y) <= 1e-4 + 1e-6 * abs(y)  # the table prints six decimals


def tally(families, alone, given, rows):
    """Adds each query's (log-probability, top flag) pairs to rows[class] =
    [count, sum lp ctx, sum p ctx, sum lp alone, sum p alone, sum top ctx, sum top alone]."""
    def add(key, lc, la, tc, ta):
        r = rows.setdefault(key, [0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
        r[0] += 1
        r[1] += lc
        r[2] += math.exp(lc)
        r[5] += tc
        if la is not None:
            r[3] += la
            r[4] += math.exp(la)
            r[6] += ta

    for fam, _, name, seq, classes in families:
        (g, gt), (s, st) = given[name], alone[name]
        n = len(seq)
        assert len(classes) == n and len(g) == len(s) == len(gt) == len(st) == n + 1
        for i, cls in enumerate(classes):
            if math.isnan(g[i]) or math.isnan(gt[i]):
                raise Failure(f"{name}: residue {i + 1} not scored given the context")
            if math.isnan(s[i]):
                add("first_residue", g[i], None, gt[i], None)
                continue
            for key in (cls, "not_copyable" if cls != "copyable" else None, "all_residues"):
                if key:
                    add(key, g[i], s[i], gt[i], st[i])
        add("end", g[n], s[n], gt[n], st[n])


def main(argv=None):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--score", required=True, help="the performer-score executable")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--families", required=True, help="idX.fasta of indelible_families.py")
    p.add_argument("--alignment", required=True, help="idX.aln.fasta of indelible_families.py")
    p.add_argument("--output", required=True, help="CSV to write")
    p.add_argument("--max-families", type=int, default=0, help="the first K families (0: all)")
    p.add_argument("--split", metavar="DATA.h5:SPLIT",
                   help="only the families with a member in this split of a prepared file")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="passed to performer-score")
    p.add_argument("--work", help="folder for the FASTA and score files (default: a temporary one, removed)")
    a = p.parse_args(argv)
    if a.max_families < 0:
        p.error(f"--max-families {a.max_families}: must be >= 0")
    for path, what in ((a.score, "--score"), (a.checkpoint, "--checkpoint"), (a.families, "--families"),
                       (a.alignment, "--alignment")):
        if not os.path.isfile(path):
            p.error(f"{what} {path}: no such file")
    if os.path.abspath(a.output) in {os.path.abspath(x) for x in (a.checkpoint, a.families, a.alignment)}:
        p.error(f"--output {a.output}: is one of the inputs")
    try:
        import h5py  # noqa: F401
    except ImportError:
        raise Failure("needs h5py (Debian: python3-h5py) to read performer-score --per-residue") from None
    only = split_families(a.split) if a.split else None
    families = families_and_queries(a.families, a.alignment, a.max_families, only)
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="aligned-copy-") as tmp:
        work = a.work or tmp
        os.makedirs(work, exist_ok=True)
        with open(os.path.join(work, "score.log"), "w") as log:
            queries = os.path.join(work, "queries.fasta")
            write_fasta(queries, [(name, seq) for _, _, name, seq, _ in families])
            run_score(a, ["--output", os.path.join(work, "alone.tsv"), "--per-residue",
                          os.path.join(work, "alone.h5"), queries], log)
            alone = read_per_residue(os.path.join(work, "alone.h5"))
            given = {}
            for fam, context, name, seq, _ in families:
                ctx, qry = os.path.join(work, f"{fam}.context.fasta"), os.path.join(work, f"{fam}.query.fasta")
                write_fasta(ctx, [(f"{fam}_context{k}", s) for k, s in enumerate(context)])
                write_fasta(qry, [(name, seq)])
                tsv, h5 = os.path.join(work, f"{fam}.given.tsv"), os.path.join(work, f"{fam}.given.h5")
                run_score(a, ["--context", ctx, "--output", tsv, "--per-residue", h5, qry], log)
                lp = read_per_residue(h5)
                if list(lp) != [name]:
                    raise Failure(f"{h5}: holds {list(lp)}, not {name}")
                given[name] = lp[name]
                row = read_table(tsv)[0]
                g_sum = float(sum(lp[name][0]))
                s = alone[name][0]
                s_sum = float(sum(x for x in s if not math.isnan(x)))
                s_n = sum(1 for x in s if not math.isnan(x))
                if not close(g_sum, float(row["log_likelihood"])):
                    raise Failure(f"{name}: per-residue log-probabilities given the context sum to {g_sum:.6f}, "
                                  f"the tool's log_likelihood is {row['log_likelihood']}")
                if not close(s_sum, float(row["alone_log_likelihood"])) or s_n != int(row["alone_scored"]):
                    raise Failure(f"{name}: the alone run's per-residue log-probabilities ({s_n} terms, "
                                  f"{s_sum:.6f}) are not the --context run's alone_scored "
                                  f"{row['alone_scored']}, alone_log_likelihood {row['alone_log_likelihood']}")
    rows = {}
    tally(families, alone, given, rows)
    seconds = time.time() - t0
    counted = rows.get("all_residues", [0])[0]
    tmp_out = a.output + ".tmp"
    with open(tmp_out, "w") as f:
        f.write("category,residues,fraction,logprob_context,prob_context,logprob_alone,prob_alone,gain_nats,"
                "accuracy_context,accuracy_alone\n")
        print(f"{len(families)} families, the last member of each scored given the earlier ones "
              f"({sum(len(c) for _, c, _, _, _ in families)} context proteins) and alone; {seconds:.1f} s")
        print(f"{'category':<16}{'residues':>9}{'fraction':>9}{'lp_ctx':>9}{'p_ctx':>8}{'lp_alone':>9}"
              f"{'p_alone':>8}{'gain':>8}{'acc_ctx':>8}{'acc_alone':>10}")
        for key in CLASSES + ["first_residue", "end"]:
            if key not in rows:
                continue
            n, lc, pc, la, pa, tc, ta = rows[key]
            frac = f"{n / counted:.4f}" if key in CLASSES and counted else ""
            if key == "first_residue":
                f.write(f"{key},{n},,{lc / n:.5f},{pc / n:.5f},,,,{tc / n:.5f},\n")
                print(f"{key:<16}{n:>9}{'':>9}{lc / n:>9.4f}{pc / n:>8.4f}{'':>9}{'':>8}{'':>8}{tc / n:>8.4f}")
                continue
            f.write(f"{key},{n},{frac},{lc / n:.5f},{pc / n:.5f},{la / n:.5f},{pa / n:.5f},{(lc - la) / n:.5f},"
                    f"{tc / n:.5f},{ta / n:.5f}\n")
            print(f"{key:<16}{n:>9}{frac:>9}{lc / n:>9.4f}{pc / n:>8.4f}{la / n:>9.4f}{pa / n:>8.4f}"
                  f"{(lc - la) / n:>8.4f}{tc / n:>8.4f}{ta / n:>10.4f}")
    os.replace(tmp_out, a.output)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failure as e:
        sys.exit(f"{PROG}: {e}")
