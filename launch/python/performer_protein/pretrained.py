"""The reading half of an export folder (export.py writes it): its
config.json and model.safetensors checked before any tensor is read, and the
tensors. The model builds itself from them (PerformerProtein.from_pretrained);
this module does not import the model, so that the model can import it."""

import json
import math
import os
import struct

from . import vocab
from .checkpoint import _fail, check_finite, check_float32, check_names, check_shape, tensor_shapes
from .config import ConfigError, ModelConfig

FORMAT = "performer-protein-export"
FORMAT_VERSION = 1
MODEL_TYPE = "performer_protein"


def read_export_config(folder):
    path = os.path.join(folder, "config.json")
    try:
        with open(path) as f:
            config = json.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{folder}: no config.json (not an export folder of performer-export)") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not JSON: {e}") from None
    if config.get("format") != FORMAT or config.get("format_version") != FORMAT_VERSION:
        raise ConfigError(f"{path}: format {config.get('format')!r} version {config.get('format_version')!r}, "
                          f"this package reads {FORMAT!r} version {FORMAT_VERSION}")
    if config.get("vocab") != vocab.DESCRIPTION:
        raise ConfigError(f"{path}: another vocabulary ({config.get('vocab')!r}), this package's is "
                          f"{vocab.DESCRIPTION!r}")
    return config


def _export_model_config(config, path):
    """The model configuration of an export's config.json (`performer`), its
    values checked (ModelConfig.validate); ConfigError naming the file and the key."""
    table = config.get("performer")
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: no model configuration (the table 'performer')")
    try:
        cfg = ModelConfig.from_dict(table, where=f"{path}: performer")
    except ConfigError as e:
        raise ConfigError(str(e) if str(e).startswith(path) else f"{path}: {e}") from None
    if cfg.vocab != vocab.SIZE:
        raise ConfigError(f"{path}: model.vocab = {cfg.vocab}, this package's protein vocabulary has {vocab.SIZE} "
                          f"tokens ({vocab.DESCRIPTION})")
    return cfg


# safetensors' own bound on the header (the JSON after the 8-byte length).
_HEADER_MAX = 100_000_000


def read_safetensors_header(path):
    """The tensors a safetensors file declares, read from its header only
    (8 bytes: the header's length N, little-endian; N bytes of JSON: per tensor
    its dtype, shape and data_offsets [begin, end) into the data after the
    header): name -> (dtype, shape, (begin, end)). The data must be the
    tensors' bytes one after the other, no gap, no overlap, ending with the
    file: CheckpointError naming the file (and the tensor) for a truncated or
    damaged one."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            _fail(path, f"truncated or not a safetensors file: {size} bytes, less than the 8 of its header length")
        n = struct.unpack("<Q", head)[0]
        if n > size - 8:
            _fail(path, f"truncated or not a safetensors file: its header length is {n} bytes, the file holds "
                        f"{size - 8} after it")
        if n > _HEADER_MAX:
            _fail(path, f"not a safetensors file: its header length is {n} bytes, more than {_HEADER_MAX}")
        text = f.read(n)
    try:
        header = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        _fail(path, f"damaged safetensors file: its header is not JSON: {e}")
    if not isinstance(header, dict):
        _fail(path, "damaged safetensors file: its header is not a JSON object")

    def count(x):
        return isinstance(x, int) and not isinstance(x, bool) and x >= 0

    tensors = {}
    for name, d in header.items():
        if name == "__metadata__":
            continue
        if not (isinstance(d, dict) and isinstance(d.get("dtype"), str) and isinstance(d.get("shape"), list) and
                all(count(x) for x in d["shape"]) and isinstance(d.get("data_offsets"), list) and
                len(d["data_offsets"]) == 2 and all(count(x) for x in d["data_offsets"]) and
                d["data_offsets"][0] <= d["data_offsets"][1]):
            _fail(path, f"damaged safetensors file: the header's entry of {name} is not a tensor declaration "
                        f"(dtype, shape, data_offsets [begin, end]): {json.dumps(d)[:200]}")
        tensors[name] = (d["dtype"], tuple(d["shape"]), tuple(d["data_offsets"]))
    data, at = size - 8 - n, 0
    for name, (_, _, (begin, end)) in sorted(tensors.items(), key=lambda t: t[1][2]):
        if end > data:
            _fail(path, f"truncated: {name} ends at byte {8 + n + end} of the file, which has {size} bytes")
        if begin != at:
            _fail(path, f"damaged safetensors file: {name} begins at data byte {begin}, the tensor before it "
                        f"ends at {at}")
        at = end
    if at != data:
        _fail(path, f"damaged safetensors file: {data - at} bytes after the last tensor's data")
    return tensors


def read_pretrained(folder):
    """The checked contents of an export folder (no HDF5 needed): (cfg,
    tensors, config, weights) with cfg the ModelConfig, tensors the float32
    arrays of model.safetensors by name, config the config.json table and
    weights that file's path. Before any tensor is read, config.json's values
    are checked and each tensor the model needs (tensor_shapes) against
    model.safetensors' header: present, no other, of that shape, stored as
    float32 and its bytes in the file; every tensor read must be finite.
    ConfigError or CheckpointError (both ValueError) naming the file and the
    key or tensor."""
    from safetensors.numpy import load_file

    config = read_export_config(folder)
    cfg = _export_model_config(config, os.path.join(folder, "config.json"))
    weights = os.path.join(folder, "model.safetensors")
    if not os.path.exists(weights):
        raise ConfigError(f"{folder}: model.safetensors is missing")
    header = read_safetensors_header(weights)
    shapes = tensor_shapes(cfg)
    check_names(weights, header, shapes, "not the model its config.json describes")
    for name, shape in shapes.items():
        stored, declared, (begin, end) = header[name]
        check_shape(weights, name, declared, shape, needs="the stored configuration (config.json) needs")
        check_float32(weights, name, stored == "F32", stored,
                      holds="exports hold float32 (F32): not written by performer-export")
        if end - begin != 4 * math.prod(shape):
            _fail(weights, f"damaged safetensors file: {name} of shape {list(shape)} (float32, "
                           f"{4 * math.prod(shape)} bytes) declares {end - begin} bytes of data")
    tensors = load_file(weights)
    for name, a in tensors.items():
        check_finite(weights, name, a)
    return cfg, tensors, config, weights
