"""The output rule of performer-export and the content checks of the
checkpoint reader, on small checkpoints written here with h5py (no C++ build),
in the empty folder WORK:
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

from performer_protein import CheckpointError, load_pretrained, read_checkpoint
from performer_protein.checkpoint import SCHEMA, SCHEMA_VERSION, fnv1a64, metadata_text, parameter_shapes
from performer_protein.config import ModelConfig

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

if failures:
    print(f"FAILED: {len(failures)} check(s)")
    sys.exit(1)
print("PASS: performer-export writes only new folders or previous exports, and cleans up; the reader refuses "
      "NaN, Inf, other types, tensors the file does not store and metadata out of range")
