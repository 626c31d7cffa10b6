"""Reading the trainer's HDF5 checkpoints (docs/checkpoints.md) with h5py,
with the checks the C++ reader makes: the schema and its version, the metadata
checksum (FNV-1a over the attributes), the step against the optimizer's step,
each number of the metadata within what a run writes, and, before any tensor is
read, every tensor's declaration (check_tensors in launch/core/checkpoint.cc):
present, of the shape the stored configuration needs, stored as float32 (never
converted), in chunks no larger than that shape and with its data stored in the
file; HDF5 verifies each dataset's Fletcher-32 checksum as it reads it. Every
tensor read must hold no NaN or Inf."""

import json
import math
import struct
import tomllib
from dataclasses import dataclass, field
from typing import Dict, List

import h5py
import numpy as np

from . import vocab
from .config import ConfigError, ModelConfig

SCHEMA = "performer-checkpoint"
SCHEMA_VERSION = 2


class CheckpointError(ValueError):
    """A file that is not a usable checkpoint (or export); the message names the file and the reason."""


def fnv1a64(data: bytes) -> str:
    """FNV-1a, 64 bits, as 16 lowercase hex digits (runtime/fnv1a.h)."""
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def _text(value):
    """A string attribute (the trainer writes vlen UTF-8 strings of shape [1])."""
    if isinstance(value, np.ndarray):
        value = value.reshape(-1)[0]
    return value.decode() if isinstance(value, bytes) else str(value)


def metadata_text(root, optimizer) -> str:
    """The text the metadata checksum covers, as launch/core/checkpoint.cc
    makes it: one "<name>=<value>" line per attribute, in a fixed order."""
    lines = [f"schema={_text(root.attrs['schema'])}"]
    for a in ("schema_version", "step", "loader_epoch", "loader_sample"):
        lines.append(f"{a}={int(root.attrs[a])}")
    lines.append(f"config={_text(root.attrs['config'])}")
    for a in ("model_seed", "redraw_index", "dp", "sp", "created"):
        lines.append(f"{a}={int(root.attrs[a])}")
    for a in ("run_id", "data"):
        if a in root.attrs:
            lines.append(f"{a}={_text(root.attrs[a])}")
    lines.append(f"optimizer/step={int(optimizer.attrs['step'])}")
    bits = struct.unpack("<Q", struct.pack("<d", float(optimizer.attrs["loss_scale"])))[0]
    lines.append(f"optimizer/loss_scale={bits:016x}")
    lines.append(f"optimizer/loss_scale_good_steps={int(optimizer.attrs['loss_scale_good_steps'])}")
    return "".join(line + "\n" for line in lines)


def parameter_shapes(cfg: ModelConfig) -> Dict[str, tuple]:
    """Every parameter's name and shape, in the trainer's order (model/params.cc)."""
    V, C, F = cfg.vocab, cfg.width, cfg.ffn
    shapes = {"embedding": (V, C)}
    for l in range(cfg.layers):
        p = f"layer{l}."
        shapes.update({p + "ln1.gamma": (C,), p + "ln1.beta": (C,), p + "qkv.weight": (3 * C, C),
                       p + "qkv.bias": (3 * C,)})
        if cfg.attention == "exp":  # the trained projections
            shapes[p + "attn.features"] = (cfg.heads, cfg.features, cfg.head_dim)
        if cfg.window > 0 and cfg.attention != "softmax":  # the local window's per-head gates
            shapes[p + "attn.gate"] = (cfg.heads,)
        shapes.update({p + "out.weight": (C, C), p + "out.bias": (C,),
                       p + "ln2.gamma": (C,), p + "ln2.beta": (C,), p + "ffn1.weight": (F, C),
                       p + "ffn1.bias": (F,), p + "ffn2.weight": (C, F), p + "ffn2.bias": (C,)})
    shapes.update({"final_ln.gamma": (C,), "final_ln.beta": (C,)})
    return shapes


def tensor_shapes(cfg: ModelConfig) -> Dict[str, tuple]:
    """Every tensor of the model of `cfg`, computed from the configuration alone:
    parameter_shapes and the random projections, `projections.layer<l>` [m, D]
    (favor, relu, elu), named as PerformerProtein.trainer_state() and an
    export name them."""
    shapes = parameter_shapes(cfg)
    if cfg.attention not in ("softmax", "exp"):  # exp's are parameters (layer<l>.attn.features)
        shapes.update({f"projections.layer{l}": (cfg.features, cfg.head_dim) for l in range(cfg.layers)})
    return shapes


# ---- the rules of a stored tensor, shared by the checkpoint reader, the export
# loader (export.py) and PerformerProtein.load_trainer_state -----------------------
def check_names(path, names, expected, why, owner="the stored configuration"):
    """The tensors a file holds (`names`) against those `expected`: none
    missing, none besides them; `why` says what a difference means."""
    for name in expected:
        if name not in names:
            _fail(path, f"{name} is missing ({why})")
    extra = sorted(set(names) - set(expected))
    if extra:
        listed = ", ".join(extra[:5]) + (f", ... ({len(extra)} in all)" if len(extra) > 5 else "")
        _fail(path, f"tensors {owner} does not have: {listed} ({why})")


def check_shape(path, key, shape, expected, needs="the stored configuration needs"):
    if tuple(shape) != tuple(expected):
        _fail(path, f"{key} has shape {list(shape)}, {needs} {list(expected)}")


def check_float32(path, key, is_float32, dtype, holds="checkpoints hold float32: not written by the trainer"):
    """A tensor stored as float32, never converted; `dtype` as the file names it."""
    if not is_float32:
        _fail(path, f"{key} is stored as {dtype}, {holds}")


def check_finite(path, key, a):
    """The tensor `a` (numpy) as read holds no NaN or Inf."""
    bad = ~np.isfinite(a)
    if bad.any():
        n, first = int(bad.sum()), [int(i) for i in np.argwhere(bad)[0]]
        _fail(path, f"{key} holds {n} NaN or Inf value{'s' if n > 1 else ''} (the first at {first}): the trainer "
                    f"saves finite parameters only, so the file was written or changed by another program")


@dataclass
class Checkpoint:
    path: str
    config: ModelConfig
    params: Dict[str, np.ndarray]          # float32, parameter_shapes(config)
    projections: List[np.ndarray]          # float32 [m, D] per layer (empty for softmax and exp)
    step: int
    redraw_index: int
    config_text: str                       # the whole resolved configuration (TOML)
    train_config: dict = field(default_factory=dict)  # config_text parsed
    data: list = field(default_factory=list)          # the data files' identities (path, size, digest, split)
    run_id: str = ""


def _fail(path, reason):
    raise CheckpointError(f"{path}: {reason}")


def _check_float32(f, path, key, shape, missing):
    """The dataset `key` as _read_float32 will read it, checked before any
    tensor is read (check_tensors in launch/core/checkpoint.cc): present, of
    `shape`, stored as float32 (never converted), in chunks no larger than that
    shape, and its data stored in the file (_check_stored)."""
    if key not in f:
        _fail(path, f"/{key} is missing ({missing})")
    d = f[key]
    if not isinstance(d, h5py.Dataset):
        _fail(path, f"/{key} is not a dataset ({missing})")
    check_shape(path, f"/{key}", d.shape, shape)
    check_float32(path, f"/{key}", d.dtype.kind == "f" and d.dtype.itemsize == 4, d.dtype)
    try:
        _check_stored(d, path, key, shape)
    except (OSError, RuntimeError) as e:
        _fail(path, f"damaged checkpoint: the declaration of /{key} failed to read: {e}")


def _check_stored(d, path, key, shape):
    """A declared shape backed by the file's own bytes, so that a read never
    returns the fill value of data that was never written: at least 4 bytes an
    element stored, whatever the layout (compact, contiguous or chunked, as the
    C++ reader requires), and for a chunked dataset chunks no larger than its
    shape and every chunk covering the shape stored."""
    chunks = d.chunks
    if chunks is not None and any(c > n for c, n in zip(chunks, shape)):
        _fail(path, f"/{key} of shape {list(shape)} declares chunks of {list(chunks)}, larger than itself")
    needed = math.prod(shape) * 4
    stored = d.id.get_storage_size()
    if stored < needed:
        _fail(path, f"/{key} of shape {list(shape)} ({needed} bytes) has only {stored} bytes stored in the file")
    if chunks is not None:
        covering = math.prod(-(-n // c) for n, c in zip(shape, chunks))
        allocated = d.id.get_num_chunks()
        if allocated < covering:
            _fail(path, f"/{key} of shape {list(shape)} in chunks of {list(chunks)} has only {allocated} of its "
                        f"{covering} chunks stored in the file")


def _read_float32(f, path, key):
    """The dataset `key` (checked by _check_float32) as float32, refused (naming
    it) when it fails its checksum or holds NaN or Inf."""
    try:
        a = np.asarray(f[key][...], dtype=np.float32)
    except OSError as e:
        _fail(path, f"damaged checkpoint: /{key} failed to read or its checksum failed: {e}")
    check_finite(path, f"/{key}", a)
    return a


def _check_metadata_ranges(path, root, optimizer):
    """Each number of the metadata within what a run writes, as the C++ reader
    checks them: a file that passes its checksum can still have been written
    by hand. The attributes are those metadata_text has read."""
    for name, obj, attr, low in (("step", root, "step", 0), ("loader_epoch", root, "loader_epoch", 0),
                                 ("loader_sample", root, "loader_sample", 0), ("dp", root, "dp", 1),
                                 ("sp", root, "sp", 1),
                                 ("optimizer/loss_scale_good_steps", optimizer, "loss_scale_good_steps", 0)):
        value = int(obj.attrs[attr])
        if value < low:
            _fail(path, f"damaged checkpoint: the attribute {name} is {value}, below {low}")
    scale = float(optimizer.attrs["loss_scale"])
    if not (math.isfinite(scale) and scale >= 0):
        _fail(path, f"damaged checkpoint: the attribute optimizer/loss_scale is {scale}, not a finite number >= 0")


def read_checkpoint(path: str) -> Checkpoint:
    """Reads and checks a checkpoint; CheckpointError naming the file and what is wrong."""
    try:
        f = h5py.File(path, "r")
    except FileNotFoundError:
        _fail(path, "no such file")
    except OSError as e:
        _fail(path, f"not a readable HDF5 checkpoint (truncated or corrupt?): {e}")
    with f:
        schema = _text(f.attrs.get("schema", b""))
        if schema != SCHEMA:
            _fail(path, f"not a performer checkpoint (no schema attribute '{SCHEMA}')")
        version = int(f.attrs.get("schema_version", -1))
        if version != SCHEMA_VERSION:
            _fail(path, f"checkpoint schema version {version}, this package reads version {SCHEMA_VERSION}")
        if "optimizer" not in f:
            _fail(path, "damaged checkpoint: the group /optimizer is missing")
        opt = f["optimizer"]
        try:
            computed = fnv1a64(metadata_text(f, opt).encode())
            stored = _text(f.attrs["metadata_checksum"])
            step, opt_step = int(f.attrs["step"]), int(opt.attrs["step"])
        except KeyError as e:
            _fail(path, f"damaged checkpoint: the attribute {e} is missing")
        if step != opt_step:
            _fail(path, f"damaged checkpoint: step {step} but the optimizer's step is {opt_step}")
        if stored != computed:
            _fail(path, f"damaged checkpoint: the metadata checksum does not match (stored {stored}, computed "
                        f"{computed}): an attribute (step, data position, configuration, ...) was changed")
        _check_metadata_ranges(path, f, opt)
        config_text = _text(f.attrs["config"])
        try:
            train = tomllib.loads(config_text)
        except tomllib.TOMLDecodeError as e:
            _fail(path, f"the stored configuration is not TOML: {e}")
        if "model" not in train:
            _fail(path, "the stored configuration has no [model] table")
        if "params" not in f or "embedding" not in f["params"]:
            _fail(path, "damaged checkpoint: /params/embedding is missing")
        rows = f["params/embedding"].shape[0]
        if rows != vocab.SIZE:
            _fail(path, f"checkpoint of another vocabulary: its token embedding has {rows} rows, this package's "
                        f"protein vocabulary has {vocab.SIZE} tokens ({vocab.DESCRIPTION})")
        try:
            cfg = ModelConfig.from_dict(dict(train["model"], vocab=rows), where=f"{path}: [model]")
        except (ConfigError, TypeError) as e:
            _fail(path, f"the stored model configuration is not one this package runs: {e}")
        tensors = {}  # HDF5 key -> (shape, why it would be missing)
        for name, shape in tensor_shapes(cfg).items():
            if name.startswith("projections."):
                tensors[name.replace(".", "/")] = (shape, "the checkpoint is damaged")
            else:
                tensors[f"params/{name}"] = (shape, "the checkpoint is from another model")
        if any(key.startswith("projections/") for key in tensors) and "projections" not in f:
            _fail(path, "the checkpoint holds no random projections (/projections): it was written by a "
                        "trainer older than this package; continue the run for a step with the current "
                        "trainer (its checkpoints store them)")
        for key, (shape, missing) in tensors.items():  # every tensor checked before any is read
            _check_float32(f, path, key, shape, missing)
        params = {name: _read_float32(f, path, f"params/{name}") for name in parameter_shapes(cfg)}
        projections = [_read_float32(f, path, key) for key in tensors if key.startswith("projections/")]
        data = json.loads(_text(f.attrs["data"])) if "data" in f.attrs and _text(f.attrs["data"]) else []
        return Checkpoint(path=path, config=cfg, params=params, projections=projections, step=step,
                          redraw_index=int(f.attrs["redraw_index"]), config_text=config_text, train_config=train,
                          data=data, run_id=_text(f.attrs.get("run_id", b"")))
