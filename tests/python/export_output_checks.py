"""The output rule of performer-export, the content checks of the
checkpoint reader and those of the export loader (load_pretrained: config.json
and the safetensors header checked before the model is built), on small
checkpoints written here with h5py and exports of them (no C++ build), in the
empty folder WORK:
    export_output_checks.py WORK
Each check prints what it measured; the last line is "PASS: ..." only when
every check passed."""

import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys

import h5py
import numpy as np
import torch
from safetensors.numpy import load_file, save_file

from performer_protein import CheckpointError, PerformerProtein, load_pretrained, read_checkpoint, vocab
from performer_protein.checkpoint import (SCHEMA, SCHEMA_VERSION, fnv1a64, metadata_text, parameter_shapes,
                                          tensor_shapes)
from performer_protein.config import ModelConfig
from performer_protein.export import export as export_folder

MODEL = {"layers": 1, "width": 32, "heads": 2, "ffn": 64, "features": 8, "attention": "favor"}
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


def write_checkpoint(path, step=3, tensors=None):
    """A checkpoint as the trainer writes it (docs/checkpoints.md), random
    parameters; `tensors` replaces datasets by name (another dtype, a NaN)."""
    cfg = ModelConfig.from_dict(MODEL)
    rng = np.random.default_rng(step)
    data = {f"params/{n}": rng.standard_normal(s).astype(np.float32) for n, s in parameter_shapes(cfg).items()}
    data.update({f"projections/layer{l}": rng.standard_normal((cfg.features, cfg.head_dim)).astype(np.float32)
                 for l in range(cfg.layers)})
    data.update(tensors or {})
    toml = "[model]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in MODEL.items()) + '[data]\nmode = "packed"\n'
    with h5py.File(path, "w") as f:
        for key, value in data.items():
            f[key] = value
        f.attrs.update({"schema": SCHEMA, "schema_version": np.int64(SCHEMA_VERSION), "step": np.int64(step),
                        "loader_epoch": np.int64(0), "loader_sample": np.int64(0), "config": toml,
                        "model_seed": np.int64(1234), "redraw_index": np.int64(0), "dp": np.int64(1),
                        "sp": np.int64(1), "created": np.int64(0), "run_id": "0123456789abcdef", "data": "[]"})
        opt = f.create_group("optimizer")
        opt.attrs.update({"step": np.int64(step), "loss_scale": np.float64(1.0),
                          "loss_scale_good_steps": np.int64(0)})
        f.attrs["metadata_checksum"] = fnv1a64(metadata_text(f, opt).encode())
    return path


# What the performer-export command runs (pyproject.toml, [project.scripts]).
ENTRY_POINT = "import sys; from performer_protein.export import main; sys.exit(main(sys.argv[1:]))"


def export(checkpoint, output, *extra, cwd=None, umask=None, file_limit=None):
    """performer-export in a process of its own: (exit status, stderr)."""
    def limits():
        if umask is not None:
            os.umask(umask)
        if file_limit is not None:  # writes past it fail with EFBIG, as on a full disk
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))
    r = subprocess.run([sys.executable, "-c", ENTRY_POINT, "--checkpoint", checkpoint, "--output", output, *extra],
                       cwd=cwd, capture_output=True, text=True, preexec_fn=limits)
    return r.returncode, r.stderr


def one_line_error(stderr, *words):
    lines = stderr.strip().splitlines()
    return len(lines) == 1 and lines[0].startswith("performer-export: error: ") and all(w in lines[0] for w in words)


def listing(folder):
    return {os.path.relpath(os.path.join(d, n), folder): open(os.path.join(d, n), "rb").read()
            for d, _, names in os.walk(folder) for n in names}


def leftovers(folder):
    return [n for n in os.listdir(folder) if ".tmp-" in n or ".old-" in n]


# Stops performer-export once its temporary folder is complete, before the
# rename; prints that folder's path, then waits for a signal.
# (A loop of short sleeps, not signal.pause(): a signal that arrives between
# the print and pause() would leave pause() waiting for ever.)
PAUSED_EXPORT = """
import sys, time
from performer_protein import output_folder
from performer_protein.export import main
set_modes = output_folder._set_modes
def paused(folder):
    set_modes(folder)
    print(folder, flush=True)
    while True:
        time.sleep(0.05)
output_folder._set_modes = paused
sys.exit(main(sys.argv[1:]))
"""


def interrupted(checkpoint, output, signum):
    """Sends `signum` to an export paused with its files written: (its temporary
    folder was there, exit status, stderr)."""
    p = subprocess.Popen([sys.executable, "-c", PAUSED_EXPORT, "--checkpoint", checkpoint, "--output", output],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tmp = p.stdout.readline().strip()
    was_there = bool(tmp) and os.path.isfile(os.path.join(tmp, "model.safetensors"))
    p.send_signal(signum)
    try:
        _, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        err = "no exit within 120 s after the signal\n" + err
    return was_there, p.returncode, err


os.chdir(sys.argv[1])
os.makedirs("run")
ck = write_checkpoint("run/ckpt-000000003.h5")
ck7 = write_checkpoint("run/ckpt-000000007.h5", step=7)

# ---- a new export: the marker, the umask's modes, a round trip ------------------------
rc, err = export(ck, "out", umask=0o027)
mode = stat.S_IMODE(os.stat("out").st_mode) if os.path.isdir("out") else None
file_modes = {stat.S_IMODE(os.stat(os.path.join("out", n)).st_mode) for n in os.listdir("out")} if mode else set()
marker = json.load(open("out/performer-export.json")) if os.path.exists("out/performer-export.json") else {}
check(rc == 0 and mode == 0o750 and file_modes == {0o640},
      f"new export with umask 027: exit {rc}, folder mode {oct(mode or 0)} (0o750), file modes "
      f"{sorted(map(oct, file_modes))} (0o640)")
check(marker.get("tool") == "performer-export" and set(marker.get("files", [])) | {"performer-export.json"} ==
      set(os.listdir("out")), f"the marker performer-export.json lists the export's files: {marker.get('files')}")
model = load_pretrained("out")
check(model.export_config["step"] == 3 and not leftovers("."), "the export loads (step 3), no temporary folder left")

# ---- a previous export is replaced; one holding a file of its own is not ---------------
rc, err = export(ck7, "out", "--no-hf-files")
names = set(os.listdir("out"))
check(rc == 0 and json.load(open("out/config.json"))["step"] == 7 and
      "modeling_performer_protein.py" not in names and not leftovers("."),
      f"export onto a previous export: exit {rc}, replaced (step 7, without the transformers files), no leftovers")
with open("out/notes.txt", "w") as f:
    f.write("mine\n")
out_before = listing("out")
rc, err = export(ck, "out")
check(rc != 0 and listing("out") == out_before and one_line_error(err, "'out'", "notes.txt"),
      f"export onto a previous export holding another file: exit {rc}, nothing changed: {err.strip()}")

# ---- refused outputs: every file stays as it was ----------------------------------------
check(export(ck, "prev")[0] == 0, "an export to stand for a previous one, prev")


def sandbox(i):
    """A folder of its own for each refused output: its run/ holds a checkpoint,
    mine/ a file of the user's, prev/ a previous export; run-link is run."""
    box = os.path.abspath(f"case{i}")
    os.makedirs(f"{box}/run")
    shutil.copy(ck, f"{box}/run")
    os.makedirs(f"{box}/mine")
    with open(f"{box}/mine/data.txt", "w") as f:
        f.write("keep\n")
    shutil.copytree("prev", f"{box}/prev")
    os.symlink("run", f"{box}/run-link")
    return box


ck_name = os.path.basename(ck)
refusals = [  # what, checkpoint, output, the folder it runs in, why
    ("a folder of other files", f"run/{ck_name}", "mine", ".", "did not write"),
    ("the checkpoint's folder", f"run/{ck_name}", "run", ".", "contains the input"),
    ("the checkpoint's folder through a symbolic link", f"run/{ck_name}", "run-link/", ".", "contains the input"),
    ("the checkpoint itself", f"run/{ck_name}", f"run/{ck_name}", ".", "is the input"),
    ("the checkpoint through a symbolic link", f"run/{ck_name}", f"run-link/{ck_name}", ".", "is the input"),
    ("a parent of the checkpoint's folder", ck_name, "..", "run", "contains the input"),
    ("'.', a folder of other files", f"../run/{ck_name}", ".", "mine", "current folder"),
    ("'.', a previous export", f"../run/{ck_name}", ".", "prev", "current folder"),
    ("a file", f"run/{ck_name}", "mine/data.txt", ".", "not a folder"),
]
for i, (what, checkpoint, output, cwd, why) in enumerate(refusals):
    box = sandbox(i)
    before = listing(box)
    rc, err = export(checkpoint, output, cwd=os.path.join(box, cwd))
    check(rc == 2 and os.path.isdir(box) and listing(box) == before and one_line_error(err, f"'{output}'", why),
          f"export onto {what}: exit {rc}, every file kept: {err.strip()}")

# ---- an interrupted export leaves no temporary folder -----------------------------------
for signum, status in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
    name = signal.Signals(signum).name
    was_there, rc, err = interrupted(ck, "new", signum)
    check(was_there and rc == status and not os.path.exists("new") and not leftovers(".") and
          one_line_error(err, name), f"{name} with the files written: exit {rc} ({status}), no folder left: "
                                     f"{err.strip()}")
if os.path.exists("out/notes.txt"):
    os.remove("out/notes.txt")
out_before = listing("out")
was_there, rc, err = interrupted(ck, "out", signal.SIGTERM)
check(was_there and rc == 143 and listing("out") == out_before and not leftovers("."),
      f"SIGTERM of an export onto a previous export: exit {rc}, the previous export kept, no folder left")

# ---- a write that fails (a full disk) ---------------------------------------------------
rc, err = export(ck, "full", file_limit=8192)
check(rc == 1 and not os.path.exists("full") and not leftovers(".") and one_line_error(err, "model.safetensors"),
      f"a write that fails: exit {rc}, no folder left: {err.strip()}")

# ---- the reader refuses NaN, Inf and tensors of another type ----------------------------
def refused(path, words):
    try:
        read_checkpoint(path)
    except CheckpointError as e:
        return all(w in str(e) for w in [path, *words]), str(e)
    return False, "read without an error"


qkv = np.zeros((96, 32), np.float32)
qkv[5, 7] = np.nan
ok, msg = refused(write_checkpoint("nan.h5", tensors={"params/layer0.qkv.weight": qkv}),
                  ["/params/layer0.qkv.weight", "1 NaN or Inf value", "[5, 7]"])
check(ok, f"a NaN parameter is refused, naming the tensor: {msg}")
proj = np.ones((8, 16), np.float32)
proj[0, 0] = np.inf
ok, msg = refused(write_checkpoint("inf.h5", tensors={"projections/layer0": proj}), ["/projections/layer0", "Inf"])
check(ok, f"an Inf projection is refused, naming it: {msg}")
ok, msg = refused(write_checkpoint("f64.h5", tensors={"params/final_ln.gamma": np.ones(32, np.float64)}),
                  ["/params/final_ln.gamma", "float64"])
check(ok, f"a float64 tensor is refused, naming it and its type: {msg}")
ok, msg = refused(write_checkpoint("f16.h5", tensors={"params/embedding": np.ones((29, 32), np.float16)}),
                  ["/params/embedding", "float16"])
check(ok, f"a float16 tensor is refused, naming it and its type: {msg}")
rc, err = export("nan.h5", "from-nan")
check(rc == 2 and not os.path.exists("from-nan") and one_line_error(err, "layer0.qkv.weight"),
      f"performer-export of a checkpoint with a NaN: exit {rc}, no folder: {err.strip()}")

# ---- the reader refuses tensors the file declares but does not store ---------------------
def with_chunks(source, path, key, chunks, written=(), maxshape=None):
    """A copy of the checkpoint `source` whose dataset `key` is declared in
    `chunks` (Fletcher-32, as the trainer writes them, fill value 0.5) with only
    the chunks starting at the corners `written` stored (ones): a read of any
    other returns the fill value, 0.5."""
    shutil.copy(source, path)
    with h5py.File(path, "r+") as f:
        shape = f[key].shape
        del f[key]
        d = f.create_dataset(key, shape=shape, dtype="<f4", chunks=chunks, maxshape=maxshape,
                             fletcher32=chunks is not None, fillvalue=0.5)
        for corner in written:
            d[tuple(slice(o, min(o + c, n)) for o, c, n in zip(corner, chunks, shape))] = 1.0
    return path


FFN1 = "params/layer0.ffn1.weight"  # [64, 32]: 8192 bytes
unwritten = with_chunks(ck, "unwritten.h5", FFN1, (64, 32))
with h5py.File(unwritten) as f:
    fill = float(f[FFN1][0, 0])
rc, err = export(unwritten, "from-unwritten")
check(fill == 0.5 and rc == 2 and not os.path.exists("from-unwritten") and not leftovers(".") and
      one_line_error(err, unwritten, f"/{FFN1} of shape [64, 32] (8192 bytes) has only 0 bytes stored in the file"),
      f"performer-export of a tensor whose chunks were never written (reads give {fill}): exit {rc}, no folder: "
      f"{err.strip()}")
ok, msg = refused(with_chunks(ck, "contiguous.h5", FFN1, None), [f"/{FFN1}", "(8192 bytes) has only 0 bytes stored"])
check(ok, f"a contiguous tensor never written is refused: {msg}")
# Three of its four chunks stored (13,836 bytes, more than the 8192 the shape needs): the missing one is counted.
ok, msg = refused(with_chunks(ck, "three-chunks.h5", FFN1, (48, 24), written=[(0, 0), (0, 24), (48, 0)]),
                  [f"/{FFN1}", "in chunks of [48, 24] has only 3 of its 4 chunks stored in the file"])
check(ok, f"a tensor with one of its chunks never written is refused: {msg}")
ok, msg = refused(with_chunks(ck, "large-chunks.h5", FFN1, (128, 32), written=[(0, 0)], maxshape=(None, 32)),
                  [f"/{FFN1}", "of shape [64, 32] declares chunks of [128, 32], larger than itself"])
check(ok, f"a tensor declaring chunks larger than itself is refused: {msg}")
whole = read_checkpoint(with_chunks(ck, "edge-chunks.h5", FFN1, (24, 32), written=[(0, 0), (24, 0), (48, 0)]))
check(bool((whole.params["layer0.ffn1.weight"] == 1).all()),
      "a tensor stored whole in chunks that overhang its shape (3 of [24, 32] for [64, 32]) is read")


# ---- the reader refuses metadata out of range, even under a valid checksum ---------------
def with_metadata(source, path, attrs):
    """A copy of the checkpoint `source` with `attrs` ("optimizer/<name>" for
    the optimizer's) changed and its metadata checksum recomputed, as a file
    written by hand would be."""
    shutil.copy(source, path)
    with h5py.File(path, "r+") as f:
        for name, value in attrs.items():
            group, _, attr = name.rpartition("/")
            f[group or "/"].attrs[attr] = value
        f.attrs["metadata_checksum"] = fnv1a64(metadata_text(f, f["optimizer"]).encode())
    return path


negative = with_metadata(ck, "negative-step.h5", {"step": np.int64(-1), "optimizer/step": np.int64(-1)})
rc, err = export(negative, "from-negative")
check(rc == 2 and not os.path.exists("from-negative") and not leftovers(".") and
      one_line_error(err, negative, "damaged checkpoint: the attribute step is -1, below 0"),
      f"performer-export of a step of -1 under a valid checksum: exit {rc}, no folder: {err.strip()}")
out_of_range = [  # attribute, value, the message's words
    ("loader_epoch", np.int64(-1), "the attribute loader_epoch is -1, below 0"),
    ("loader_sample", np.int64(-5), "the attribute loader_sample is -5, below 0"),
    ("dp", np.int64(0), "the attribute dp is 0, below 1"),
    ("sp", np.int64(-2), "the attribute sp is -2, below 1"),
    ("optimizer/loss_scale_good_steps", np.int64(-1), "the attribute optimizer/loss_scale_good_steps is -1, below 0"),
    ("optimizer/loss_scale", np.float64(-1.0), "optimizer/loss_scale is -1.0, not a finite number >= 0"),
    ("optimizer/loss_scale", np.float64(np.nan), "optimizer/loss_scale is nan, not a finite number >= 0"),
    ("optimizer/loss_scale", np.float64(np.inf), "optimizer/loss_scale is inf, not a finite number >= 0"),
]
for i, (name, value, words) in enumerate(out_of_range):
    ok, msg = refused(with_metadata(ck, f"range{i}.h5", {name: value}), ["damaged checkpoint", words])
    check(ok, f"{name} = {value} under a valid checksum is refused: {msg}")

# ---- the export loader checks before it allocates ----------------------------------------
# Every export below is a copy of a good one with config.json or model.safetensors
# changed; load_pretrained must refuse it with a ValueError naming the file and
# the tensor (or the key), before it builds the model.
good = export_folder(ck, "good")
WEIGHTS = "model.safetensors"


def changed_export(name, performer=None, tensors=None, drop=(), truncate=None):
    """A copy of the export `good`: its config.json's `performer` updated with
    `performer`; model.safetensors with `tensors` replaced or added, `drop`
    left out, or the whole file cut to `truncate` bytes."""
    shutil.copytree(good, name)
    if performer:
        with open(f"{name}/config.json") as f:
            config = json.load(f)
        config["performer"].update(performer)
        with open(f"{name}/config.json", "w") as f:
            json.dump(config, f)
    if tensors or drop:
        t = load_file(f"{name}/{WEIGHTS}")
        t.update(tensors or {})
        save_file({k: v for k, v in t.items() if k not in drop}, f"{name}/{WEIGHTS}")
    if truncate is not None:
        os.truncate(f"{name}/{WEIGHTS}", truncate)
    return name


def load_refused(folder, words, file=WEIGHTS):
    """(load_pretrained refused `folder` with a ValueError whose message names
    folder/file and holds every one of `words`, the message)"""
    try:
        load_pretrained(folder)
    except ValueError as e:
        return all(w in str(e) for w in [os.path.join(folder, file), *words]), f"{type(e).__name__}: {e}"
    except Exception as e:  # noqa: BLE001 -- any other error is a failed check
        return False, f"{type(e).__name__} instead of ValueError: {e}"
    return False, "loaded without an error"


# The expected tensors come from the configuration alone; the model built from it agrees.
configs = [MODEL, dict(MODEL, attention="relu", layers=2), dict(MODEL, attention="softmax"),
           dict(MODEL, attention="softmax", window=16), dict(MODEL, attention="elu", features=16),
           dict(MODEL, attention="exp", exp_key_norm=True), dict(MODEL, attention="favor", window=8, layers=3)]
for table in configs:
    cfg = ModelConfig.from_dict(table)
    built = {k: tuple(v.shape) for k, v in PerformerProtein(cfg).trainer_state().items()}
    check(built == tensor_shapes(cfg),
          f"tensor_shapes equals the built model's trainer_state() shapes: {cfg.attention}, window {cfg.window}, "
          f"{cfg.layers} layer(s), {len(built)} tensors")

# The good export loads, with the checkpoint's logits.
ids = torch.tensor([vocab.encode("MKTAYIAKQRQISFVKSHFSRQ")])
a, b = PerformerProtein.from_checkpoint(ck), PerformerProtein.from_pretrained(good)
same_tensors = all(torch.equal(x, b.trainer_state()[k]) for k, x in a.trainer_state().items())
check(same_tensors and torch.equal(a(ids), b(ids)) and bool(torch.isfinite(b(ids)).all()),
      "the good export loads: its tensors and logits equal the checkpoint's exactly")

# A config.json far larger than its tensors, under a limit of 1 GiB more address
# space than the interpreter holds after importing torch (the limit is set after
# the imports, which need far more): refused with a ValueError, not MemoryError.
LIMITED_LOAD = """
import resource, sys, time
import torch
from performer_protein import load_pretrained
if sys.argv[2] == "transformers":
    from transformers import AutoModel
    load = lambda folder: AutoModel.from_pretrained(folder, trust_remote_code=True)
else:
    load = load_pretrained
vm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmSize:")) * 1024
hard = resource.getrlimit(resource.RLIMIT_AS)[1]
limit = vm + (1 << 30) if hard == resource.RLIM_INFINITY else min(vm + (1 << 30), hard)
resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
try:  # the limit holds: 2 GiB cannot be allocated under it
    torch.zeros(1 << 29)
    print("UNLIMITED")
except RuntimeError:
    pass
t = time.monotonic()
try:
    load(sys.argv[1])
    print("LOADED")
except BaseException as e:
    print(type(e).__name__, isinstance(e, ValueError), f"{time.monotonic() - t:.2f}", e, sep="\\t")
"""


def limited_load(folder, how="package"):
    """(error type, is a ValueError, seconds, message) of a load of `folder` under the limit."""
    r = subprocess.run([sys.executable, "-c", LIMITED_LOAD, folder, how], capture_output=True, text=True)
    fields = r.stdout.strip().split("\t")
    if r.returncode != 0 or len(fields) != 4 or "UNLIMITED" in r.stdout:
        return None, False, None, f"exit {r.returncode}: {r.stdout.strip()} {r.stderr.strip()[-2000:]}"
    return fields[0], fields[1] == "True", float(fields[2]), fields[3]


wide = changed_export("wide", performer={"width": 65536})
kind, is_value_error, seconds, msg = limited_load(wide)
check(is_value_error and all(w in msg for w in [f"wide/{WEIGHTS}", "embedding has shape [29, 32]",
                                                "config.json) needs [29, 65536]"]),
      f"an export whose config.json says width 65,536 (tensors 32 wide), under a 1 GiB limit: {kind}, "
      f"{seconds} s: {msg}")
big = changed_export("big", performer={"width": 4096, "ffn": 32768})
kind, is_value_error, seconds, msg = limited_load(big)
check(is_value_error and seconds is not None and seconds < 5 and
      all(w in msg for w in [f"big/{WEIGHTS}", "embedding has shape [29, 32]", "needs [29, 4096]"]),
      f"an export whose config.json says width 4,096 and ffn 32,768 (a 2.87 GB model), under the limit: "
      f"{kind} in {seconds} s (< 5): {msg}")
try:
    import transformers  # noqa: F401
    kind, is_value_error, seconds, msg = limited_load(os.path.abspath(wide), "transformers")
    check(is_value_error and "embedding has shape [29, 32]" in msg,
          f"transformers' AutoModel.from_pretrained of the width-65,536 export under the limit: {kind}: {msg}")
except ImportError:
    print("skip  transformers is not installed: AutoModel.from_pretrained not checked")

# config.json's values: of their type and range, the key named, before any tensor is compared.
for i, (performer, words) in enumerate([
        ({"layers": 0}, ["model.layers = 0", "out of range"]),
        ({"layers": 1 << 20}, ["model.layers = 1048576", "out of range: must be in [1, 1024]"]),
        ({"width": 1 << 17}, ["model.width = 131072", "out of range: must be in [1, 65536]"]),
        ({"ffn": "64"}, ["model.ffn = '64'", "must be an integer"]),
        ({"heads": 2.0}, ["model.heads = 2.0", "must be an integer"]),
        ({"features": -8}, ["model.features = -8", "out of range"]),
        ({"vocab": 30}, ["model.vocab = 30", "protein vocabulary"])]):
    ok, msg = load_refused(changed_export(f"config{i}", performer=performer), words, file="config.json")
    check(ok, f"config.json with {performer} is refused, naming the key: {msg}")
ok, msg = load_refused(changed_export("two-layers", performer={"layers": 2}),
                       ["layer1.ln1.gamma is missing", "not the model its config.json describes"])
check(ok, f"config.json with 2 layers for the tensors of 1 is refused, naming the first missing tensor: {msg}")

# The tensors: each one refused naming it.
qkv = load_file(f"{good}/{WEIGHTS}")["layer0.qkv.weight"].copy()
qkv[5, 7] = np.nan
ok, msg = load_refused(changed_export("nan", tensors={"layer0.qkv.weight": qkv}),
                       ["layer0.qkv.weight holds 1 NaN or Inf value", "(the first at [5, 7])"])
check(ok, f"an export with a NaN is refused, naming the tensor and where: {msg}")
proj = np.ones((8, 16), np.float32)
proj[2, 3] = proj[4, 5] = -np.inf
ok, msg = load_refused(changed_export("inf", tensors={"projections.layer0": proj}),
                       ["projections.layer0 holds 2 NaN or Inf values", "(the first at [2, 3])"])
check(ok, f"an export with two -Inf is refused, naming the tensor and the count: {msg}")
ok, msg = load_refused(changed_export("f16", tensors={"embedding": np.ones((29, 32), np.float16)}),
                       ["embedding is stored as F16", "exports hold float32 (F32)"])
check(ok, f"an export with a float16 tensor is refused, naming it, its dtype and float32: {msg}")
ok, msg = load_refused(changed_export("f64", tensors={"final_ln.gamma": np.ones(32, np.float64)}),
                       ["final_ln.gamma is stored as F64", "exports hold float32 (F32)"])
check(ok, f"an export with a float64 tensor is refused, naming it and its dtype: {msg}")
ok, msg = load_refused(changed_export("missing", drop=["layer0.ffn2.bias"]), ["layer0.ffn2.bias is missing"])
check(ok, f"an export without a tensor is refused, naming it: {msg}")
ok, msg = load_refused(changed_export("extra", tensors={"layer1.ffn2.bias": np.zeros(32, np.float32)}),
                       ["tensors the stored configuration does not have: layer1.ffn2.bias"])
check(ok, f"an export with a tensor of no model layer is refused, naming it: {msg}")
ok, msg = load_refused(changed_export("reshaped", tensors={"layer0.ffn1.weight": np.zeros((32, 64), np.float32)}),
                       ["layer0.ffn1.weight has shape [32, 64]", "needs [64, 32]"])
check(ok, f"an export with a transposed tensor is refused, naming it and both shapes: {msg}")
size = os.path.getsize(f"{good}/{WEIGHTS}")
for name, cut, words in (("cut-data", size - 100, ["truncated:", f"the file, which has {size - 100} bytes"]),
                         ("cut-header", 200, ["truncated or not a safetensors file: its header length is"]),
                         ("cut-length", 5, ["truncated or not a safetensors file: 5 bytes"])):
    ok, msg = load_refused(changed_export(name, truncate=cut), words)
    check(ok, f"model.safetensors cut to {cut} of its {size} bytes is refused: {msg}")
with open(f"{changed_export('trailing')}/{WEIGHTS}", "ab") as f:
    f.write(b"\0" * 12)
ok, msg = load_refused("trailing", ["12 bytes after the last tensor's data"])
check(ok, f"model.safetensors with 12 bytes after its data is refused: {msg}")


if failures:
    print(f"FAILED: {len(failures)} check(s)")
    sys.exit(1)
print("PASS: performer-export writes only new folders or previous exports, and cleans up; the reader refuses "
      "NaN, Inf, other types, tensors the file does not store and metadata out of range; load_pretrained "
      "checks config.json and the safetensors header before it allocates, and refuses NaN, Inf and other types")
