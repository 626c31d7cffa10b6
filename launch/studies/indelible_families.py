#!/usr/bin/env python3
"""Protein families of a known divergence, evolved from real proteins with
INDELible (1.03): for each requested identity, every root is evolved along
one tree into MEMBERS members with a protein substitution model, insertions
and deletions, and the tree is scaled until the members' identity to their
root, measured on INDELible's true alignment, is the one requested.

  indelible_families.py ROOTS.fasta[.gz] OUTDIR [--identity 0.9 0.7 0.5 0.3]
      [--families 100] [--members 4] [--min-length 60] [--max-length 400]
      [--model WAG] [--indel-rate 0.05] [--indel-power 1.7] [--indel-max 50]
      [--gamma-alpha 1.0] [--gamma-categories 4] [--tree star|balanced] [--tolerance 0.005] [--seed 0]

Roots. The proteins of ROOTS whose length is in [--min-length, --max-length]
and that hold only the 20 standard amino acids (INDELible takes no other
letter); --families of them are drawn with the seed and kept in file order.
Family f has the same root at every identity.

Evolution (INDELible's [MODEL]): --model is any amino-acid model INDELible
names (WAG, LG, JTT, Dayhoff, Blosum, ...) at its own stationary
frequencies; site rates are gamma distributed with shape --gamma-alpha in
--gamma-categories discrete categories (default 4; 0 = a continuous gamma,
about 7 times slower; alpha 0 = every site the same rate). Insertions and deletions each
occur at --indel-rate per site relative to a substitution rate of 1 (the
rate of each, not of both together), with lengths from a Zipf (power-law)
distribution P(k) ~ k^-a, a = --indel-power, k <= --indel-max. The tree
(--tree) has every member at the same depth D from the root (expected
substitutions per site): `star` gives each member its own branch of length
D, so members are independent descendants of the root; `balanced` is an
ultrametric binary tree in which a clade of s members sits at height
D * log2(s) / log2(MEMBERS), so members share part of their history.

Bounds, refused when parsing the arguments: --members at most 256 (each
member's insertions widen its family's alignment, so time and memory grow about
as the square of MEMBERS), --indel-rate at most 1 (each of insertions and
deletions no more frequent than substitutions; INDELible's time grows steeply
above), --indel-max at most 100000 and --gamma-categories at most 100 (far
larger values stall INDELible; more categories only approach the continuous
gamma, 0).

Identity to the root is measured on the true alignment: over the columns
where the root and a member both hold a residue, the fraction that hold the
same one; pooled over every member of every family. D is found by bisection
on log D (the same INDELible seed at every step, so each step is a
deterministic function of D), stopping at the first D whose pooled identity
is within --tolerance of the request; if none is within it after 40 steps,
the closest is kept and a warning says so. The output is INDELible's run at
that D, so the reported identity is the output's own.

Reproducible: INDELible's [SETTINGS] randomseed for identity x is derived
from (--seed, x), so the same roots, arguments and seed give byte-identical
files, and families at 0.9 do not depend on which other identities are
asked for. INDELible runs in a temporary folder that is removed on every
path; OUTDIR is written under a temporary name and renamed when complete,
and must not exist.

Files in OUTDIR, per identity x written as two decimals (id0.90, ...):
  idX.fasta       members, unaligned, one line per sequence: >fam<f>_m<k>,
                  families in order, members m0..m<MEMBERS-1>; what
                  `performer-data prepare` reads (its family mode uses the
                  MMseqs2 clusters of the prepared file as families).
  idX.aln.fasta   INDELible's true alignment, one block per family: the root
                  first (>fam<f>_root ROOT_ID, ROOT_ID the first word of its
                  header in ROOTS), then >fam<f>_m0 ...; '-' is a gap, every
                  row of a block has the same length, and a column that is a
                  gap in every row of the block is dropped (a residue
                  inserted and deleted again, or an inner node's). A row
                  with its gaps removed is the sequence of idX.fasta.
  idX.members.tsv family, member, root_id, length, identity (to the root, as
                  above), root_aligned (the fraction of the root's residues
                  aligned to one of the member).
  idX.families.tsv one line per member: its name, a tab, its family
                  (fam<f>): the table of `performer-data prepare --families`,
                  which makes the families the file's clusters (MMseqs2 does
                  not regroup them below about 70 % identity).
  idX.control.txt the INDELible control file of the kept run.
  summary.tsv     one line per identity (also printed): requested and
                  achieved identity, the members' range, depth D, bisection
                  runs, root_aligned, mean lengths, the mean identity between
                  two members, copyable_last (the fraction of each family's
                  last member's residues whose column holds the same residue
                  in an earlier member: what a model reading the earlier
                  members could copy), and the INDELible seed.

Exit status: 0 done, 2 for a bad argument, 1 for anything else (an unreadable
or empty ROOTS, too few roots, INDELible missing or failing; the message
names the file or argument).
"""
import argparse
import ctypes
import gzip
import hashlib
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile

PROG = "indelible_families.py"
AMINO = set("ACDEFGHIKLMNPQRSTVWY")
MODELS = ["Poisson", "JTT", "JTT-dcmut", "Dayhoff", "Dayhoff-dcmut", "WAG", "mtMAM", "mtART", "mtREV",
          "rtREV", "cpREV", "Vt", "Blosum", "LG", "HIVb", "HIVw"]
DEPTH_LO, DEPTH_HI, MAX_STEPS = 1e-4, 20.0, 40
# Upper bounds of the size arguments. Measured with 2 families at identity 0.3:
# 64 members took 3 s and 0.2 GB, 128 members 12 s and 0.8 GB, 256 members
# 61 s and 3.2 GB (each member's insertions widen every row of its family's
# alignment); --indel-max 10000000, --gamma-categories 100000 and
# --indel-rate 10 did not finish in a minute.
MAX_MEMBERS, MAX_INDEL_RATE, MAX_INDEL_MAX, MAX_GAMMA_CATEGORIES = 256, 1.0, 100000, 100


class Failure(Exception):
    """An error to report as `indelible_families.py: message` with exit status 1."""


# --- FASTA and alignments (shared with aligned_copy.py) ---------------------

def read_fasta(path):
    """[(header without '>', sequence)] of a FASTA file, plain or gzipped."""
    opener = gzip.open if path.endswith(".gz") else open
    records, header, seq = [], None, []
    try:
        with opener(path, "rt") as f:
            for number, line in enumerate(f, 1):
                line = line.strip()
                if line.startswith(">"):
                    if header is not None:
                        records.append((header, "".join(seq)))
                    header, seq = line[1:].strip(), []
                elif line:
                    if header is None:
                        raise Failure(f"{path}:{number}: sequence before the first '>' header (not FASTA)")
                    seq.append(line)
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise Failure(f"{path}: cannot read: {e}") from None
    if header is not None:
        records.append((header, "".join(seq)))
    return records


def family_of(name):
    """'fam12_m3' -> ('fam12', 'm3'); 'fam12_root' -> ('fam12', 'root')."""
    fam, sep, member = name.rpartition("_")
    if not sep or not fam or not member:
        raise ValueError(name)
    return fam, member


def read_alignment(path):
    """{family: [(row name, aligned row)]} of an idX.aln.fasta, root row first,
    in file order; checks that every block has a root and rows of one length."""
    blocks = {}
    for header, row in read_fasta(path):
        name = header.split()[0] if header else ""
        try:
            fam, member = family_of(name)
        except ValueError:
            raise Failure(f"{path}: header '>{header}' is not >fam<f>_root or >fam<f>_m<k>") from None
        blocks.setdefault(fam, []).append((member, row))
    for fam, rows in blocks.items():
        if rows[0][0] != "root":
            raise Failure(f"{path}: family {fam} does not start with its root row {fam}_root")
        if len({len(r) for _, r in rows}) != 1:
            raise Failure(f"{path}: the rows of family {fam} differ in length")
    return blocks


def identity(a, b):
    """(identical, aligned) residue pairs of two aligned rows ('-' a gap)."""
    same = aligned = 0
    for x, y in zip(a, b):
        if x != "-" and y != "-":
            aligned += 1
            same += x == y
    return same, aligned


def copy_classes(earlier, query):
    """For each residue of the aligned row `query` (gaps skipped), in order:
    'copyable' when some row of `earlier` holds the same residue in its
    column, 'substituted' when some holds a residue and none the same one,
    'unaligned' when every earlier row has a gap there."""
    classes = []
    for c, r in enumerate(query):
        if r == "-":
            continue
        column = [row[c] for row in earlier if row[c] != "-"]
        classes.append("copyable" if r in column else "substituted" if column else "unaligned")
    return classes


# --- INDELible ----------------------------------------------------------------

def die_with_parent():
    """Run in the child before exec: SIGKILL when this script dies (Linux)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def tree_newick(members, depth, shape):
    """Newick tree of leaves m0..m<members-1>, each at distance `depth` from the root."""
    names = [f"m{k}" for k in range(members)]
    if shape == "star":
        return "(" + ",".join(f"{n}:{depth:.8f}" for n in names) + ");"
    top = math.log2(members)

    def height(size):
        return depth * math.log2(size) / top

    def clade(group):
        if len(group) == 1:
            return group[0]
        half = (len(group) + 1) // 2
        parts = []
        for part in (group[:half], group[half:]):
            parts.append(f"{clade(part)}:{height(len(group)) - height(len(part)):.8f}")
        return "(" + ",".join(parts) + ")"

    return clade(names) + ";"


def control_text(a, seed, depth, nfam):
    lines = [
        "[TYPE] AMINOACID 1",
        "[SETTINGS]",
        "  [ancestralprint] SAME",  # the root row in the true alignment
        "  [output] FASTA",
        f"  [randomseed] {seed}",
        "  [insertaslowercase] FALSE",
        "  [markdeletedinsertions] FALSE",
        "  [printrates] FALSE",
        "[MODEL] m",
        f"  [submodel] {a.model}",
        f"  [indelmodel] POW {a.indel_power} {a.indel_max}",
        f"  [indelrate] {a.indel_rate}",
        f"  [rates] 0 {a.gamma_alpha} {a.gamma_categories}",
        f"[TREE] t {tree_newick(a.members, depth, a.tree)}",
    ]
    lines += [f"[PARTITIONS] p{f} [t m root{f}.txt]" for f in range(nfam)]
    lines.append("[EVOLVE]")
    lines += [f"  p{f} 1 fam{f}" for f in range(nfam)]
    return "\n".join(lines) + "\n"


def run_indelible(exe, work, control, nfam, members):
    """Runs INDELible in `work` (root<f>.txt there) and returns, per family,
    [(root row), (m0 row), ...] of the true alignment, all-gap columns dropped."""
    for name in os.listdir(work):
        if not name.startswith("root"):
            os.remove(os.path.join(work, name))
    with open(os.path.join(work, "control.txt"), "w") as f:
        f.write(control)
    try:
        r = subprocess.run([exe], cwd=work, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           errors="replace", preexec_fn=die_with_parent)
    except OSError as e:
        raise Failure(f"cannot start {exe}: {e}") from None
    if r.returncode != 0:
        tail = "\n".join(line for line in (r.stdout + r.stderr).splitlines() if line.strip())[-2000:]
        raise Failure(f"{exe} exited with status {r.returncode}:\n{tail}")
    wanted = ["ROOT"] + [f"m{k}" for k in range(members)]
    families = []
    for f in range(nfam):
        path = os.path.join(work, f"fam{f}_TRUE.fas")
        if not os.path.exists(path):
            raise Failure(f"{exe} wrote no {os.path.basename(path)} (exit status 0)")
        rows = {h.split()[0]: s for h, s in read_fasta(path) if h}
        missing = [n for n in wanted if n not in rows]
        if missing:
            raise Failure(f"{exe}: {os.path.basename(path)} lacks rows {', '.join(missing)}")
        kept = [rows[n] for n in wanted]
        cols = [c for c in range(len(kept[0])) if any(row[c] != "-" for row in kept)]
        families.append(["".join(row[c] for c in cols) for row in kept])
    return families


def measure(families):
    """Pooled (identical, aligned) residue pairs of every member with its root."""
    same = aligned = 0
    for rows in families:
        for member in rows[1:]:
            s, n = identity(rows[0], member)
            same += s
            aligned += n
    return same, aligned


def indelible_seed(seed, target):
    digest = hashlib.sha256(f"indelible_families:{seed}:{target:.6f}".encode()).hexdigest()
    return int(digest[:7], 16) + 1  # 1 .. 2^28


def calibrate(a, exe, work, seed, target, nfam):
    """Bisection on log D; returns (depth, families, pooled identity, runs, control)."""
    def run(depth):
        control = control_text(a, seed, depth, nfam)
        fams = run_indelible(exe, work, control, nfam, a.members)
        same, aligned = measure(fams)
        return fams, (same / aligned if aligned else 0.0), control

    lo, hi = math.log(DEPTH_LO), math.log(DEPTH_HI)
    best = None
    for step in range(1, MAX_STEPS + 1):
        depth = float(f"{math.exp((lo + hi) / 2):.8f}")  # as written in the tree
        fams, ident, control = run(depth)
        if best is None or abs(ident - target) < abs(best[2] - target):
            best = (depth, fams, ident, step, control)
        if abs(ident - target) <= a.tolerance:
            return depth, fams, ident, step, control
        if ident > target:
            lo = math.log(depth)
        else:
            hi = math.log(depth)
        if step == 1:
            # The ends: a request beyond what D in [DEPTH_LO, DEPTH_HI] reaches fails clearly.
            _, far, _ = run(DEPTH_HI)
            if far > target + a.tolerance:
                raise Failure(f"--identity {target}: members keep identity {far:.3f} to their root even at depth "
                              f"{DEPTH_HI} under {a.model}; ask for a higher identity")
    depth, fams, ident, _, control = best
    print(f"{PROG}: warning: identity {target}: no depth within {a.tolerance} after {MAX_STEPS} runs; "
          f"kept depth {depth} (identity {ident:.4f})", file=sys.stderr)
    return depth, fams, ident, MAX_STEPS + 1, control


# --- Output -------------------------------------------------------------------

def write_identity(out, a, target, roots, fams, depth, ident, runs, control, seed):
    tag = f"id{target:.2f}"
    n_members = a.members
    member_ids, root_kept, root_len, member_len = [], 0, 0, 0
    pair_same = pair_aligned = copy_yes = copy_all = 0
    with open(os.path.join(out, tag + ".fasta"), "w") as fa, \
            open(os.path.join(out, tag + ".aln.fasta"), "w") as aln, \
            open(os.path.join(out, tag + ".members.tsv"), "w") as tsv, \
            open(os.path.join(out, tag + ".families.tsv"), "w") as table:
        tsv.write("family\tmember\troot_id\tlength\tidentity\troot_aligned\n")
        for f, ((root_id, root_seq), rows) in enumerate(zip(roots, fams)):
            if rows[0].replace("-", "") != root_seq:
                raise Failure(f"INDELible's ROOT row of family {f} is not its root sequence {root_id}")
            aln.write(f">fam{f}_root {root_id}\n{rows[0]}\n")
            root_len += len(root_seq)
            for k, row in enumerate(rows[1:]):
                seq = row.replace("-", "")
                if not seq:
                    raise Failure(f"identity {target}: member fam{f}_m{k} lost every residue (depth {depth}); "
                                  f"lower --indel-rate or raise --min-length")
                s, n = identity(rows[0], row)
                member_ids.append(s / n if n else 0.0)
                root_kept += n
                member_len += len(seq)
                fa.write(f">fam{f}_m{k}\n{seq}\n")
                aln.write(f">fam{f}_m{k}\n{row}\n")
                table.write(f"fam{f}_m{k}\tfam{f}\n")
                tsv.write(f"fam{f}\tm{k}\t{root_id}\t{len(seq)}\t{member_ids[-1]:.4f}\t{n / len(root_seq):.4f}\n")
            for i in range(1, n_members + 1):
                for j in range(i + 1, n_members + 1):
                    s, n = identity(rows[i], rows[j])
                    pair_same += s
                    pair_aligned += n
            classes = copy_classes(rows[1:-1], rows[-1])
            copy_yes += classes.count("copyable")
            copy_all += len(classes)
    with open(os.path.join(out, tag + ".control.txt"), "w") as f:
        f.write(control)
    nf = len(roots)
    return {
        "identity_requested": f"{target:.4f}",
        "identity_achieved": f"{ident:.4f}",
        "member_identity_min": f"{min(member_ids):.4f}",
        "member_identity_max": f"{max(member_ids):.4f}",
        "depth": f"{depth:.6f}",
        "runs": str(runs),
        "families": str(nf),
        "members": str(n_members),
        "root_aligned": f"{root_kept / (root_len * n_members):.4f}",
        "mean_root_length": f"{root_len / nf:.1f}",
        "mean_member_length": f"{member_len / (nf * n_members):.1f}",
        "pairwise_identity": f"{pair_same / pair_aligned if pair_aligned else 0:.4f}",
        "copyable_last": f"{copy_yes / copy_all if copy_all else 0:.4f}",
        "indelible_seed": str(seed),
    }


def choose_roots(path, a):
    records = read_fasta(path)
    if not records:
        raise Failure(f"{path}: no FASTA records")
    eligible = []
    for header, seq in records:
        seq = seq.upper().rstrip("*")
        if a.min_length <= len(seq) <= a.max_length and set(seq) <= AMINO:
            eligible.append((header.split()[0] if header else f"record{len(eligible)}", seq))
    if len(eligible) < a.families:
        raise Failure(f"{path}: {len(eligible)} of its {len(records)} proteins have {a.min_length}-{a.max_length} "
                      f"residues of the 20 standard amino acids; --families {a.families} needs that many")
    picks = sorted(random.Random(a.seed).sample(range(len(eligible)), a.families))
    return [eligible[i] for i in picks]


def parse_args(argv):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("roots", help="FASTA (plain or .gz) of real proteins to evolve from")
    p.add_argument("outdir", help="folder to create for the output (must not exist)")
    p.add_argument("--identity", type=float, nargs="+", default=[0.9, 0.7, 0.5, 0.3],
                   help="identities to the root, each in (0, 1)")
    p.add_argument("--families", type=int, default=100)
    p.add_argument("--members", type=int, default=4)
    p.add_argument("--min-length", type=int, default=60)
    p.add_argument("--max-length", type=int, default=400)
    p.add_argument("--model", default="WAG", help="INDELible amino-acid model: " + ", ".join(MODELS))
    p.add_argument("--indel-rate", type=float, default=0.05,
                   help="insertion rate and deletion rate, each, per site relative to substitutions")
    p.add_argument("--indel-power", type=float, default=1.7, help="Zipf exponent a of indel lengths (> 1)")
    p.add_argument("--indel-max", type=int, default=50, help="longest indel")
    p.add_argument("--gamma-alpha", type=float, default=1.0, help="gamma shape of site rates; 0 = none")
    p.add_argument("--gamma-categories", type=int, default=4,
                   help="discrete gamma categories; 0 = continuous (several times slower)")
    p.add_argument("--tree", choices=["star", "balanced"], default="star")
    p.add_argument("--tolerance", type=float, default=0.005, help="|achieved - requested| identity to stop at")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--indelible", default="indelible", help="the INDELible executable (default: on PATH)")
    a = p.parse_args(argv)
    bad = [f"--identity {x}" for x in a.identity if not 0 < x < 1]
    if bad:
        p.error(f"{', '.join(bad)}: each identity must be in (0, 1)")
    if len({f"{x:.2f}" for x in a.identity}) != len(a.identity):
        p.error("--identity: two values round to the same two decimals (the file names)")
    if a.families < 1:
        p.error(f"--families {a.families}: need at least 1")
    if a.members < 2:
        p.error(f"--members {a.members}: need at least 2")
    if a.members > MAX_MEMBERS:
        p.error(f"--members {a.members}: at most {MAX_MEMBERS} (each member's insertions widen its family's "
                f"alignment, so time and memory grow about as the square of --members)")
    if not 1 <= a.min_length <= a.max_length:
        p.error(f"--min-length {a.min_length} --max-length {a.max_length}: need 1 <= min <= max")
    canonical = {m.lower(): m for m in MODELS}
    if a.model.lower() not in canonical:
        p.error(f"--model {a.model}: not one of {', '.join(MODELS)}")
    a.model = canonical[a.model.lower()]
    if not 0 <= a.indel_rate <= MAX_INDEL_RATE:
        p.error(f"--indel-rate {a.indel_rate}: must be in [0, {MAX_INDEL_RATE:g}] (insertions and deletions each no "
                f"more frequent than substitutions; INDELible's time grows steeply above)")
    if not a.indel_power > 1:
        p.error(f"--indel-power {a.indel_power}: must be > 1")
    if not 1 <= a.indel_max <= MAX_INDEL_MAX:
        p.error(f"--indel-max {a.indel_max}: must be in [1, {MAX_INDEL_MAX}] (far longer indels stall INDELible)")
    if not a.gamma_alpha >= 0:
        p.error(f"--gamma-alpha {a.gamma_alpha}: must be >= 0")
    if not 0 <= a.gamma_categories <= MAX_GAMMA_CATEGORIES:
        p.error(f"--gamma-categories {a.gamma_categories}: must be in [0, {MAX_GAMMA_CATEGORIES}] (more categories "
                f"only approach the continuous gamma, 0, and far more stall INDELible)")
    if not 0 < a.tolerance < 0.5:
        p.error(f"--tolerance {a.tolerance}: must be in (0, 0.5)")
    if os.path.lexists(a.outdir):
        p.error(f"{a.outdir}: exists; the output folder must be new")
    return a


def main(argv=None):
    a = parse_args(argv)
    exe = shutil.which(a.indelible)
    if exe is None:
        raise Failure(f"INDELible '{a.indelible}' not found on PATH (Debian: apt-get install indelible, "
                      f"which launch/scripts/install_deps.sh lists)")
    if not os.path.isfile(a.roots):
        raise Failure(f"{a.roots}: no such file")
    roots = choose_roots(a.roots, a)
    parent = os.path.dirname(os.path.abspath(a.outdir))
    if not os.path.isdir(parent):
        raise Failure(f"{a.outdir}: its folder {parent} does not exist")
    out = tempfile.mkdtemp(prefix="." + os.path.basename(os.path.abspath(a.outdir)) + ".", dir=parent)
    columns = None
    try:
        rows = []
        with tempfile.TemporaryDirectory(prefix="indelible-") as work:
            for f, (_, seq) in enumerate(roots):
                with open(os.path.join(work, f"root{f}.txt"), "w") as fh:
                    fh.write(seq + "\n")
            for target in a.identity:
                seed = indelible_seed(a.seed, target)
                depth, fams, ident, runs, control = calibrate(a, exe, work, seed, target, len(roots))
                row = write_identity(out, a, target, roots, fams, depth, ident, runs, control, seed)
                rows.append(row)
                print(f"identity {target:.2f}: achieved {row['identity_achieved']} (members "
                      f"{row['member_identity_min']}-{row['member_identity_max']}) at depth {row['depth']} "
                      f"after {runs} INDELible runs; root residues aligned {row['root_aligned']}; length "
                      f"{row['mean_member_length']} (roots {row['mean_root_length']}); member-member identity "
                      f"{row['pairwise_identity']}; last member copyable {row['copyable_last']}", flush=True)
        columns = list(rows[0])
        with open(os.path.join(out, "summary.tsv"), "w") as f:
            f.write("\t".join(columns) + "\n")
            for row in rows:
                f.write("\t".join(row[c] for c in columns) + "\n")
        os.rename(out, a.outdir)
    finally:
        if os.path.isdir(out):
            shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failure as e:
        sys.exit(f"{PROG}: {e}")
    except KeyboardInterrupt:
        sys.exit(130)
