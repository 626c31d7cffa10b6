"""The checks of golden_test.sh, on the files it made in WORK:
    golden_checks.py WORK REPO
Each check prints what it measured; any failure raises, and the last line is
"PASS: ..." only when every check passed."""

import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import torch

from performer_protein import (CheckpointError, PerformerProtein, context_gain, embed, export, load_pretrained,
                               packed_layout, read_sequences, score, score_in_context)

work, repo = sys.argv[1], sys.argv[2]
os.chdir(work)
RUNS = ["favor_clm_f32_small", "favor_clm_f32_packed", "favor_mlm_bf16_single", "relu_clm_f32_concat", "relu_mlm_f32_packed",
        "softmax_clm_bf16_packed", "softmax_mlm_f32_single", "elu_clm_f32_packed", "elu_mlm_f32_single",
        "exp_clm_f32_packed", "exp_mlm_bf16_concat", "favor_clm_f32_family", "softmax_mlm_f32_family",
        "exp_clm_f32_family", "favor_clm_f32_window_family", "softmax_mlm_f32_window"]
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


def rel(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def ckpt(name):
    return f"{name}/ckpt-000000003.h5"


def batch_of(golden, model):
    with h5py.File(golden, "r") as g:
        ids = torch.from_numpy(g["inputs"][...].astype(np.int64))
        targets = torch.from_numpy(g["targets"][...].astype(np.int64))
        B, n = ids.shape
        positions, segments = None, None
        if "piece_sample" in g:
            positions, segments = packed_layout(g["piece_sample"][...].tolist(), g["piece_begin"][...].tolist(),
                                                g["piece_position"][...].tolist(), B, n,
                                                g["piece_joins"][...].tolist())
        want = {"logits": g["logits"][...], "loss_sum": float(g.attrs["loss_sum"]), "count": int(g.attrs["count"]),
                "grads": {k: g["grads"][k][...] for k in g["grads"]}}
    return ids, targets, positions, segments, want


def golden_forward_backward(name, golden, precision, tol_logits, tol_loss, tol_grads):
    model = PerformerProtein.from_checkpoint(ckpt(name), dtype=torch.float64).set_precision(precision)
    ids, targets, positions, segments, want = batch_of(golden, model)
    logits = model(ids, positions, segments)
    loss_sum, count = model.loss_sum(logits, targets)
    check(count == want["count"], f"{name} [{precision or 'f32'}]: {count} predicted tokens, C++ {want['count']}")
    e_logits = rel(logits.detach().numpy(), want["logits"])
    e_loss = abs(float(loss_sum) - want["loss_sum"]) / abs(want["loss_sum"])
    (loss_sum / count).backward()
    state = model.trainer_state()
    worst, worst_name = 0.0, ""
    for pname, g in want["grads"].items():
        e = rel(state[pname].grad.numpy(), g)
        if e > worst:
            worst, worst_name = e, pname
    check(e_logits <= tol_logits, f"{name} [{precision or 'f32'}]: logits rel L2 {e_logits:.1e} (<= {tol_logits:.0e})")
    check(e_loss <= tol_loss, f"{name} [{precision or 'f32'}]: loss rel {e_loss:.1e} (<= {tol_loss:.0e})")
    check(worst <= tol_grads, f"{name} [{precision or 'f32'}]: first-step gradients worst rel L2 {worst:.1e} "
                              f"({worst_name}) (<= {tol_grads:.0e})")


# ---- 1. logits, loss and first-step gradients against the C++ model ----------------
for name in RUNS:
    golden_forward_backward(name, f"{name}.golden.h5", None, 1e-5, 1e-6, 1e-4)
    dtype = name.split("_")[2]  # as the trainer trained it
    if dtype != "f32":  # the trainer's own mixed-precision forward, rounding emulated
        golden_forward_backward(name, f"{name}.golden_{dtype}.h5", dtype, 1e-3, 1e-4, 2e-2)

# Family batches hold members that join the state of the member before them
# (else the golden above would not test the family layout).
for name in ["favor_clm_f32_family", "softmax_mlm_f32_family", "exp_clm_f32_family", "favor_clm_f32_window_family"]:
    with h5py.File(f"{name}.golden.h5", "r") as g:
        joins = int(g["piece_joins"][...].sum())
        starts = int((g["piece_joins"][...] == 0).sum())
    check(joins > 0 and starts > 1, f"{name}: the golden batch has {joins} joined members and {starts} families")

# ---- 2. damaged checkpoints are refused, naming the reason -------------------------
src = ckpt("favor_clm_f32_packed")


def refused(path, words):
    try:
        PerformerProtein.from_checkpoint(path)
    except CheckpointError as e:
        return all(w in str(e) for w in words) and path in str(e)
    return False


shutil.copy(src, "edited.h5")
with h5py.File("edited.h5", "r+") as f:
    f.attrs["loader_sample"] = np.int64(int(f.attrs["loader_sample"]) + 1)
check(refused("edited.h5", ["metadata checksum does not match"]), "an edited attribute fails the metadata checksum")
with open(src, "rb") as f:
    data = f.read()
with open("truncated.h5", "wb") as f:
    f.write(data[: len(data) // 2])
check(refused("truncated.h5", ["not a readable HDF5 checkpoint"]), "a truncated file is refused")
with h5py.File(src, "r") as f:
    offset = f["params/layer1.ffn1.weight"].id.get_chunk_info(0).byte_offset  # chunked (Fletcher-32)
flipped = bytearray(data)
for i in range(offset + 100, offset + 108):
    flipped[i] ^= 0xFF
with open("flipped.h5", "wb") as f:
    f.write(bytes(flipped))
check(refused("flipped.h5", ["layer1.ffn1.weight", "checksum"]), "a flipped byte in a tensor fails its Fletcher-32")

# ---- 3. performer-score / performer-embed against score() / embed() ----------------
proteins = list(read_sequences("proteins.fasta"))
for name in ["favor_clm_f32_packed", "relu_clm_f32_concat", "softmax_clm_bf16_packed", "relu_mlm_f32_packed"]:
    model = PerformerProtein.from_checkpoint(ckpt(name), dtype=torch.float64).set_precision(None)
    rows = [json.loads(line) for line in open(f"{name}.score.jsonl")]
    with h5py.File(f"{name}.score.h5", "r") as h, h5py.File(f"{name}.embed.h5", "r") as e:
        off, lp, eoff = h["offsets"][...], h["logprob"][...], e["residues/offsets"][...]
        worst_total = worst_res = worst_mean = worst_rows = 0.0
        for i, rec in enumerate(proteins):
            s = score(model, rec.tokens)
            worst_total = max(worst_total, abs(s.total - rows[i]["log_likelihood"]) / abs(rows[i]["log_likelihood"]))
            check(rows[i]["id"] == rec.id and rows[i]["scored"] == s.scored, f"{name}: {rec.id} scored terms")
            theirs = lp[off[i]:off[i + 1]]
            same_nan = np.array_equal(np.isnan(theirs), np.isnan(s.logprob))
            check(same_nan, f"{name}: {rec.id} the same positions scored")
            mask = ~np.isnan(theirs)
            worst_res = max(worst_res, float(np.max(np.abs(theirs[mask] - s.logprob[mask]))))
            mean, res = embed(model, rec.tokens, per_residue=True)
            worst_mean = max(worst_mean, rel(mean, e["mean"][i]))
            worst_rows = max(worst_rows, rel(res, e["residues/embeddings"][eoff[i]:eoff[i + 1]]))
    check(worst_total <= 1e-5, f"{name}: score totals rel {worst_total:.1e} (<= 1e-5)")
    check(worst_res <= 1e-4, f"{name}: per-residue log-probabilities max abs {worst_res:.1e} (<= 1e-4)")
    check(worst_mean <= 1e-5, f"{name}: mean embeddings rel L2 {worst_mean:.1e} (<= 1e-5)")
    check(worst_rows <= 1e-5, f"{name}: per-residue embeddings rel L2 {worst_rows:.1e} (<= 1e-5)")

# ---- 4. one titin-length protein (35,000 residues) ---------------------------------
titin = next(read_sequences("titin.fasta"))
# In a process of its own, so that its peak resident memory is the scoring's.
probe = subprocess.run([sys.executable, "-c", f"""
import resource, torch
from performer_protein import PerformerProtein, read_sequences, score
torch.set_num_threads(1)
model = PerformerProtein.from_checkpoint({ckpt("favor_clm_f32_packed")!r})  # float32, as a user runs it
idle = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
s = score(model, next(read_sequences("titin.fasta")).tokens)
print(s.total, idle / 1024, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""], capture_output=True, text=True, check=True)
total, idle_mib, peak_mib = map(float, probe.stdout.split())
theirs = json.loads(open("titin.score.jsonl").readline())
e_titin = abs(total - theirs["log_likelihood"]) / abs(theirs["log_likelihood"])
check(len(titin.tokens) == 35000 and e_titin <= 1e-5,
      f"titin length ({len(titin.tokens)} residues), causal FAVOR+ score (float32) rel {e_titin:.1e} (<= 1e-5), "
      f"peak RSS {peak_mib:.0f} MiB (model loaded: {idle_mib:.0f} MiB)")
model = PerformerProtein.from_checkpoint(ckpt("favor_mlm_bf16_single")).set_precision(None)
mean, _ = embed(model, titin.tokens)
with h5py.File("titin.embed.h5", "r") as e:
    e_mean = rel(mean, e["mean"][0])
check(e_mean <= 1e-5, f"titin length, bidirectional FAVOR+ mean embedding rel L2 {e_mean:.1e} (<= 1e-5)")

# ---- 4b. performer-score --context against score_in_context() ----------------------
context = [r.tokens for r in read_sequences("context.fasta")]
queries = list(read_sequences("context_queries.fasta"))
for name in ["favor_clm_f32_family", "exp_clm_f32_family", "relu_clm_f32_concat", "softmax_clm_bf16_packed",
             "favor_clm_f32_window_family"]:
    model = PerformerProtein.from_checkpoint(ckpt(name), dtype=torch.float64).set_precision(None)
    rows = [json.loads(line) for line in open(f"{name}.context.jsonl")]
    with h5py.File(f"{name}.context.h5", "r") as h:
        off, lp = h["offsets"][...], h["logprob"][...]
        worst_total = worst_res = worst_gain = 0.0
        for i, rec in enumerate(queries):
            given, alone = score_in_context(model, context, rec.tokens), score(model, rec.tokens)
            row = rows[i]
            check(row["id"] == rec.id and row["scored"] == given.scored == len(rec.tokens) + 1
                  and row["alone_scored"] == alone.scored, f"{name}: {rec.id} given the context, terms scored")
            worst_total = max(worst_total, abs(given.total - row["log_likelihood"]) / abs(row["log_likelihood"]),
                              abs(alone.total - row["alone_log_likelihood"]) / abs(row["alone_log_likelihood"]))
            worst_res = max(worst_res, float(np.max(np.abs(lp[off[i]:off[i + 1]] - given.logprob))))
            worst_gain = max(worst_gain, abs(context_gain(given, alone) - row["gain_per_token"]))
    mode = open(f"{name}.context.log").read()
    how = "one pass per query" if name.startswith("softmax") else "cached state"
    check(how in mode, f"{name}: performer-score --context ran with {how}")
    check(worst_total <= 1e-5, f"{name}: --context totals (given and alone) rel {worst_total:.1e} (<= 1e-5)")
    check(worst_res <= 1e-4, f"{name}: --context per-residue log-probabilities max abs {worst_res:.1e} (<= 1e-4)")
    check(worst_gain <= 1e-5, f"{name}: --context gain per token max abs {worst_gain:.1e} (<= 1e-5)")
model = PerformerProtein.from_checkpoint(ckpt("softmax_mlm_f32_family"))
try:
    score_in_context(model, context, queries[0].tokens)
    refused_mlm = False
except ValueError as e:
    refused_mlm = "causal" in str(e)
check(refused_mlm, "score_in_context refuses a masked model, saying it needs a causal one")

# ---- 5. export: safetensors + config.json, round trip exact ------------------------
for name in RUNS:
    out = export(ckpt(name), f"export/{name}")
    a = PerformerProtein.from_checkpoint(ckpt(name))
    b = load_pretrained(out)
    same = all(torch.equal(x, b.trainer_state()[k]) for k, x in a.trainer_state().items())
    ids, targets, positions, segments, _ = batch_of(f"{name}.golden.h5", a)
    a.set_precision(None), b.set_precision(None)
    with torch.no_grad():
        same_logits = torch.equal(a(ids, positions, segments), b(ids, positions, segments))
    card = open(os.path.join(out, "README.md")).read()
    data_file = "families.h5" if name.endswith("_family") else "data.h5"
    check(same and same_logits and "step 3" in card and data_file in card,
          f"{name}: export round trip (tensors and logits identical, model card names step and data)")
r = subprocess.run([sys.executable, "-m", "performer_protein.export", "--checkpoint", "flipped.h5", "--output",
                    "export/bad"], capture_output=True, text=True)
check(r.returncode == 2 and "flipped.h5" in r.stderr and not os.path.exists("export/bad"),
      "performer-export of a damaged checkpoint: exit 2, names the file, writes nothing")

# ---- 6. transformers AutoModel, where transformers is installed --------------------
try:
    import transformers  # noqa: F401
    have_hf = True
except ImportError:
    have_hf = False
if have_hf:
    from transformers import AutoModel
    for name in ["favor_clm_f32_packed", "softmax_mlm_f32_single"]:
        hf = AutoModel.from_pretrained(os.path.abspath(f"export/{name}"), trust_remote_code=True)
        a = load_pretrained(f"export/{name}").set_precision(None)
        ids, _, positions, segments, _ = batch_of(f"{name}.golden.h5", a)
        with torch.no_grad():
            e = rel(hf(input_ids=ids, positions=positions, segments=segments).logits.numpy(),
                    a(ids, positions, segments).numpy())
        check(e == 0.0, f"{name}: transformers AutoModel (trust_remote_code) logits equal the package's ({e:.1e})")
else:
    print("skip  transformers is not installed: AutoModel not checked")

# ---- 7. the fine-tuning example -----------------------------------------------------
r = subprocess.run([sys.executable, os.path.join(repo, "launch/python/examples/finetune_composition.py"),
                    "--model", "export/favor_mlm_bf16_single", "--data", "data.h5", "--steps", "60",
                    "--proteins", "96"], capture_output=True, text=True)
print(r.stdout.strip())
check(r.returncode == 0 and "loss went down" in r.stdout, "the fine-tuning example runs and its loss goes down")

if failures:
    print(f"FAILED: {len(failures)} check(s): " + "; ".join(failures))
    sys.exit(1)
print("PASS: the Python package reproduces the C++ model, its tools and its checkpoints")
