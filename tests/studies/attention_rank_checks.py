#!/usr/bin/env python3
"""Checks of launch/studies/attention_rank.py without a trained model:
  attention_rank_checks.py <launch/studies folder> <work folder>
(launch/python must be on PYTHONPATH). Prints PASS: at the end.

- relatives_mass and effective_rank on hand-made matrices (values worked out
  by hand below), 0 for one member;
- family_sample's layout: each member's residues then <end>, positions
  restarting at 0 per member, one segment over the family;
- on random models of every attention kind, causal and bidirectional: A V is
  the model's attention output, A's rows sum to 1, the causal A puts no mass
  on later rows (so the first member's rows none on the relatives), the score
  matrix of a linear kernel has rank <= m, softmax's is of full rank on
  generic q, k, each score row's largest entry is 1, and relatives mass
  lies in [0, 1];
- the script end to end on a small cluster-split file (models stood in by
  random ones): single and family modes, the CSV header and values, append
  with the same header, refusal (naming the file) of another header."""
import csv
import os
import sys

import h5py
import numpy as np
import torch

studies, work = sys.argv[1], sys.argv[2]
sys.path.insert(0, studies)
import attention_rank as ar  # noqa: E402
from performer_protein import ModelConfig, PerformerProtein, vocab  # noqa: E402

torch.set_num_threads(1)
torch.manual_seed(0)
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


# ---- relatives_mass, effective_rank by hand --------------------------------------------------
n = 5
A = torch.tril(torch.ones(n, n, dtype=torch.float64))
A = (A / A.sum(-1, keepdim=True))[None]  # uniform causal: row i puts 1/(i+1) on each j <= i
members = [(0, 2), (2, 3), (3, 5)]
# row 2 (member 2): columns 0, 1 of 3 -> 2/3; rows 3, 4 (member 3): 3/4, 3/5
want = (2 / 3 + 3 / 4 + 3 / 5) / 3
got = float(ar.relatives_mass(A, members)[0])
check(abs(got - want) < 1e-12, f"relatives_mass of the uniform causal 5x5: {got}, want {want}")
check(float(ar.relatives_mass(A, [(0, n)])[0]) == 0.0, "relatives_mass of one member is 0")
check(torch.equal(ar.uniform_attention(n, True), A), "uniform_attention (causal) is the uniform causal matrix")
check(torch.equal(ar.uniform_attention(4, False), torch.full((1, 4, 4), 0.25, dtype=torch.float64)),
      "uniform_attention (bidirectional) puts 1/n everywhere")
B = torch.full((1, 4, 4), 0.25, dtype=torch.float64)  # uniform bidirectional, members of 2: rows 2, 3 put 1/2 back
check(abs(float(ar.relatives_mass(B, [(0, 2), (2, 4)])[0]) - 0.5) < 1e-12, "relatives_mass of the uniform 4x4")
D = torch.diag(torch.tensor([1.0, 0.5, 0.02, 0.005], dtype=torch.float64))[None]
check(int(ar.effective_rank(D, 0.01)[0]) == 3, "effective_rank counts singular values above 1 % of the largest")

# ---- the family layout -------------------------------------------------------------------------
seqs = [np.array([4, 5], np.uint8), np.array([6], np.uint8), np.array([7, 8, 9], np.uint8)]
ids, positions, segments, mem = ar.family_sample(seqs)
E = vocab.END
check(ids.tolist() == [[4, 5, E, 6, E, 7, 8, 9, E]], f"family ids {ids.tolist()}")
check(positions.tolist() == [[0, 1, 2, 0, 1, 0, 1, 2, 3]], f"family positions {positions.tolist()}")
check(segments == [[(0, 9)]], f"family segments {segments}")
check(mem == [(0, 3), (3, 5), (5, 9)], f"family members {mem}")


# ---- random models -----------------------------------------------------------------------------
def random_model(kind, objective, m=8):
    cfg = ModelConfig(layers=2, width=32, heads=2, ffn=64, features=(16 if kind == "elu" else m), attention=kind,
                      objective=objective, chunk=8)
    model = PerformerProtein(cfg).to(torch.float64)
    with torch.no_grad():
        for name, t in model.trainer_state().items():
            if name.startswith("projections.") and kind == "elu":
                t.copy_(torch.eye(t.shape[0], dtype=t.dtype))
            elif name.endswith("gamma"):
                t.fill_(1.0)
            elif name.startswith("projections.") or name.endswith("attn.features") or name == "embedding":
                t.normal_(0.0, 1.0)
            else:
                t.normal_(0.0, 0.3 if name.endswith("qkv.weight") else 0.05)
    return model.eval()


sample = ar.family_sample([np.random.default_rng(k).integers(4, 24, 6 + 3 * k).astype(np.uint8) for k in range(4)])
for kind in ("softmax", "favor", "relu", "elu", "exp"):
    for objective in ("clm", "mlm"):
        model = random_model(kind, objective)
        cfg = model.config
        ids, positions, segments, mem = sample
        n = ids.shape[1]
        with torch.no_grad():
            for l, layer in enumerate(model.layers):
                x = model.hidden_states(ids, positions, segments, layer=l)
                qkv = layer.qkv(layer.ln1(x)).view(1, n, 3, cfg.heads, cfg.head_dim).permute(2, 0, 3, 1, 4)
                q, k, v = qkv[0, 0], qkv[1, 0], qkv[2, 0]
                A = ar.attention_matrix(cfg, layer, q, k)
                W = layer.features if kind == "exp" else layer.projection
                out = ar.attention(kind, q, k, v, W, cfg.causal, cfg.chunk, cfg.exp_key_norm)
                err = float((A @ v - out).abs().max() / out.abs().max())
                what = f"{kind} {objective} layer {l}"
                check(err < 1e-10, f"{what}: A V differs from the attention output by {err:.3g}")
                check(bool(torch.allclose(A.sum(-1), torch.ones(cfg.heads, n, dtype=A.dtype))), f"{what}: rows sum to 1")
                if cfg.causal:
                    check(float(torch.triu(A, 1).abs().max()) == 0.0, f"{what}: causal A has mass above the diagonal")
                mass = ar.relatives_mass(A, mem)
                check(bool(((mass >= 0) & (mass <= 1)).all()), f"{what}: relatives mass {mass.tolist()} in [0, 1]")
                check(float(ar.relatives_mass(A, [(0, n)]).abs().max()) == 0.0, f"{what}: one member gives 0")
                S = ar.score_matrix(cfg, layer, q, k)
                check(float((S.amax(-1) - 1).abs().max()) < 1e-12, f"{what}: score rows scaled to a largest entry of 1")
                if kind != "softmax":
                    r = ar.effective_rank(S, 1e-10)
                    bound = cfg.features
                    check(int(r.max()) <= bound, f"{what}: score rank {r.tolist()} above m = {bound}")
                    check(int(r.min()) >= 1, f"{what}: score rank {r.tolist()} at least 1")

# softmax on generic q, k: exp(q k^T / sqrt(D)) has full rank although q k^T has rank D < n;
# the linear kernel of the same q, k at m = 4 has rank <= 4.
g = torch.Generator().manual_seed(1)
q = torch.randn(1, 12, 4, generator=g, dtype=torch.float64)
k = torch.randn(1, 12, 4, generator=g, dtype=torch.float64)
soft = random_model("softmax", "clm")
r = int(ar.effective_rank(ar.score_matrix(soft.config, soft.layers[0], q, k), 1e-12)[0])
check(r == 12, f"softmax score matrix of generic q, k [12, 4]: rank {r}, want 12")
fav = PerformerProtein(ModelConfig(layers=1, width=4, heads=1, ffn=8, features=4, attention="favor")).to(torch.float64)
with torch.no_grad():
    fav.layers[0].projection.normal_(generator=g)
r = int(ar.effective_rank(ar.score_matrix(fav.config, fav.layers[0], q, k), 1e-12)[0])
check(1 <= r <= 4, f"FAVOR+ score matrix at m = 4: rank {r}, want <= 4")

# ---- the script end to end ---------------------------------------------------------------------
data, out, bad = (os.path.join(work, name) for name in ("fam.h5", "rank.csv", "old.csv"))
for path in (data, out, bad):  # a rerun in the same folder starts afresh
    if os.path.exists(path):
        os.remove(path)
rng = np.random.default_rng(3)
lengths = [70, 21, 22, 23, 24, 90, 25, 26, 27, 100, 28]   # clusters 0: one protein; 1: four; 2..: below
clusters = [0, 1, 1, 1, 1, 2, 3, 3, 3, 4, 3]             # cluster 3 has members 6, 7, 8, 10
seqs_ = [rng.integers(4, 24, L).astype(np.uint8) for L in lengths]
with h5py.File(data, "w") as f:
    f.attrs["schema"] = "performer-protein-v2"
    f.attrs["schema_version"] = np.int64(2)
    f.attrs["vocabulary"] = vocab.DESCRIPTION
    f.attrs["split_rule"] = "cluster"
    gr = f.create_group("test")
    gr["tokens"] = np.concatenate(seqs_)
    gr["offsets"] = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    gr["ids"] = np.array([f"p{i}" for i in range(len(lengths))], dtype=h5py.string_dtype())
    gr["clusters"] = np.array(clusters, np.int64)

models = {"soft.h5": random_model("softmax", "clm"), "favor.h5": random_model("favor", "mlm")}
ar.PerformerProtein.from_checkpoint = classmethod(lambda cls, path, dtype=None: models[os.path.basename(path)])


def run(*argv):
    sys.argv = ["attention_rank.py", "--data", data, "--split", "test", *argv, "soft.h5", "favor.h5"]
    try:
        ar.main()
        return None
    except SystemExit as e:
        return str(e.code)


check(run("--proteins", "2", "--output", out) is None, "single mode runs")
check(run("--family", "3", "--proteins", "2", "--min-length", "1", "--max-length", "400", "--output", out) is None,
      "family mode runs")
rows = list(csv.reader(open(out)))
check(rows[0] == ar.HEADER, f"header {rows[0]}")
check(len(rows) == 1 + 4 + 4, f"{len(rows) - 1} rows, want 8 (2 checkpoints x 2 layers x 2 modes)")
body = [dict(zip(rows[0], r)) for r in rows[1:]]
for r in body[:4]:  # single: proteins 0 and 5 (70, 90 residues), no <end>
    check(r["family"] == "0" and float(r["relatives_mass_mean"]) == 0.0 and float(r["length_mean"]) == 80.0,
          f"single row {r}")
for r in body[4:]:  # families: clusters 1 (members 1-3: 22+23+24 tokens) and 3 (members 6-8: 26+27+28)
    check(r["family"] == "3" and float(r["length_mean"]) == (69 + 81) / 2, f"family row {r}")
    check(0.0 < float(r["relatives_mass_mean"]) <= 1.0, f"family relatives mass {r['relatives_mass_mean']}")
    # uniform over members of 22, 23, 24 and 26, 27, 28 tokens: the mean over the later members'
    # rows of (tokens before the member) / (row + 1) (causal) or / n (bidirectional)
    causal = r["objective"] == "clm"
    def base(b, e, n):
        return sum(b / ((i + 1) if causal else n) for i in range(b, e))
    want_uniform = ((base(22, 45, 69) + base(45, 69, 69)) / 47 + (base(26, 53, 81) + base(53, 81, 81)) / 55) / 2
    check(abs(float(r["relatives_mass_uniform"]) - want_uniform) < 1e-3,
          f"uniform base rate {r['relatives_mass_uniform']}, want {want_uniform:.4f}")
    check(1 <= float(r["score_rank_mean"]) <= float(r["score_rank_max"]), f"family score ranks {r}")
for r in body:
    if r["attention"] == "favor":
        check(int(r["score_rank_max"]) <= 8, f"FAVOR+ score rank above m = 8: {r}")
check(run("--family", "1", "--proteins", "3", "--min-length", "1", "--output", out) is None, "K = 1 runs")
for r in list(csv.DictReader(open(out)))[-4:]:
    check(float(r["relatives_mass_mean"]) == 0.0 and r["family"] == "1", f"K = 1 has no relatives: {r}")
check(run("--family", "5", "--min-length", "1") is not None, "no cluster of 5 members is an error")
with open(bad, "w") as f:
    f.write("checkpoint,attention,objective,features,layer,rank_mean,rank_min,rank_max,length_mean,rank_over_n\n")
msg = run("--output", bad)
check(msg is not None and bad in msg, f"another header is refused naming the file: {msg}")
check(open(bad).read().count("\n") == 1, "the refused file is left as it was")

if failures:
    sys.exit(f"{len(failures)} check(s) failed")
print("PASS: attention_rank checks")
