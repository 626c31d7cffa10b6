"""Export of a checkpoint to a folder that needs no HDF5 and no trainer:

    model.safetensors   float32 tensors named as in the checkpoint (`embedding`,
                        `layer0.qkv.weight`, ...) and the random projections
                        (`projections.layer0`, ...; favor and relu models)
    config.json         the model configuration, the vocabulary, the step,
                        the training data mode (for score's first_residue)
    README.md           a model card: what was trained on which data, how far,
                        the whole training configuration
    configuration_performer_protein.py, modeling_performer_protein.py
                        the Hugging Face `transformers` glue (docs/python.md)
    performer-export.json
                        the marker of an export: the files it wrote (a later
                        export replaces the folder only when it holds that
                        marker and nothing else; output_folder.py)

    performer-export --checkpoint X.h5 --output DIR
    python -m performer_protein.export --checkpoint X.h5 --output DIR

Round trip: load_pretrained(DIR) has bit-identical tensors and computes the
same logits as PerformerProtein.from_checkpoint(X.h5)."""

import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch

from . import vocab
from .checkpoint import (CheckpointError, _fail, check_finite, check_float32, check_names, check_shape,
                         read_checkpoint, tensor_shapes)
from .config import ConfigError, ModelConfig
from .model import PerformerProtein
from .output_folder import Interrupted, OutputPathError, check_output, new_folder, signals_raise

TOOL = "performer-export"  # its marker in each export folder: performer-export.json (output_folder.py)
FORMAT = "performer-protein-export"
FORMAT_VERSION = 1
MODEL_TYPE = "performer_protein"
_HF_FILES = ("configuration_performer_protein.py", "modeling_performer_protein.py")


def _attention_text(cfg):
    if cfg.attention in ("favor", "relu"):
        kind = "FAVOR+" if cfg.attention == "favor" else "ReLU-kernel"
        text = f"{kind} attention (`{cfg.attention}`, {cfg.features} random features)"
    elif cfg.attention == "elu":
        text = "elu(x) + 1 linear attention (`elu`)"
    elif cfg.attention == "exp":
        text = f"exp-kernel linear attention (`exp`, {cfg.features} trained features)"
    elif cfg.window > 0:
        return f"exact softmax attention over a local window of {cfg.window} positions (`softmax`)"
    else:
        return "exact softmax attention (`softmax`)"
    if cfg.window > 0:
        text += f" mixed per head with exact softmax over a local window of {cfg.window} positions"
    return text


def _model_card(ck, cfg):
    train = ck.train_config
    data = train.get("data", {})
    lines = [
        "---", "library_name: pytorch", "tags: [protein, performer, linear-attention]", "---", "",
        f"# Performer protein language model (step {ck.step})", "",
        f"A {cfg.layers}-layer, width-{cfg.width}, {cfg.heads}-head model with {_attention_text(cfg)}",
        f"trained with the {'causal' if cfg.causal else 'masked'} language-modelling objective "
        f"(`{cfg.objective}`) for {ck.step} optimizer steps, model dtype `{cfg.dtype}`.", "",
        f"- Source checkpoint: `{os.path.basename(ck.path)}` (run `{ck.run_id or 'unknown'}`), "
        f"random-feature redraw index {ck.redraw_index}",
        f"- Samples: data.mode = `{data.get('mode', '?')}`, sample_length {data.get('sample_length', '?')}, "
        f"batch_size {data.get('batch_size', '?')}, sampling `{data.get('sampling', '?')}`",
        f"- Vocabulary ({vocab.SIZE} tokens): `{vocab.DESCRIPTION}`", "",
        "## Training data", "",
    ]
    if ck.data:
        lines += ["| file | bytes | content digest | split rule |", "| --- | --- | --- | --- |"]
        lines += [f"| `{d.get('path')}` | {d.get('size')} | `{d.get('digest')}` | {d.get('split_rule')} |"
                  for d in ck.data]
    else:
        lines.append("The checkpoint records no data identity (written before the trainer stored it).")
    lines += ["", "The split rule says how train, validation and test were drawn: `hash` splits by sequence, "
              "`by cluster` keeps each MMseqs2 cluster on one side (no close homologues across splits).", "",
              "## Use", "", "```python", "from performer_protein import PerformerProtein, score, embed",
              "model = PerformerProtein.from_pretrained('.')", "```", "",
              "## Training configuration", "", "```toml", ck.config_text.rstrip(), "```", ""]
    return "\n".join(lines)


def export(checkpoint, output, hf_files=True):
    """Writes the export folder `output`, a new folder or the replacement of a
    previous export (output_folder.py says which paths are refused); returns its path."""
    from safetensors import SafetensorError  # from PyPI: only the export needs it
    from safetensors.numpy import save_file

    rule = dict(tool=TOOL, fmt=(FORMAT, FORMAT_VERSION), inputs=[checkpoint])
    check_output(output, **rule)  # before the checkpoint is read
    ck = read_checkpoint(checkpoint)
    cfg = ck.config
    tensors = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in ck.params.items()}
    tensors.update({f"projections.layer{l}": np.ascontiguousarray(w) for l, w in enumerate(ck.projections)})
    config = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "model_type": MODEL_TYPE,
        "performer": cfg.to_dict(), "vocab": vocab.DESCRIPTION,
        "tokens": {"pad": vocab.PAD, "end": vocab.END, "mask": vocab.MASK, "unk": vocab.UNK,
                   "first_residue": vocab.FIRST_RESIDUE},
        "step": ck.step, "redraw_index": ck.redraw_index, "run_id": ck.run_id,
        "data_mode": ck.train_config.get("data", {}).get("mode", ""), "data": ck.data,
        "source_checkpoint": os.path.basename(ck.path),
    }
    if hf_files:
        config["architectures"] = ["PerformerProteinModel"]
        config["auto_map"] = {"AutoConfig": "configuration_performer_protein.PerformerProteinConfig",
                              "AutoModel": "modeling_performer_protein.PerformerProteinModel"}
    with new_folder(output, **rule) as folder:
        try:
            save_file(tensors, folder.path("model.safetensors"),
                      metadata={"format": "pt", "source": FORMAT, "step": str(ck.step)})
        except SafetensorError as e:  # a full disk, among others
            raise OSError(f"{folder.final_path('model.safetensors')}: {e}") from None
        folder.write_json("config.json", config)
        folder.write_text("README.md", _model_card(ck, cfg))
        if hf_files:
            here = os.path.join(os.path.dirname(__file__), "hf")
            for name in _HF_FILES:
                folder.copy_file(name, os.path.join(here, name))
    return output


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


def load_pretrained(folder, dtype=torch.float32):
    """The model of an export folder (no HDF5 needed). Before the model is
    built or any tensor read, config.json's values are checked and each tensor
    it needs (tensor_shapes) against model.safetensors' header: present, no
    other, of that shape, stored as float32 and its bytes in the file; every
    tensor read must be finite. ConfigError or CheckpointError (both
    ValueError) naming the file and the key or tensor."""
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
    model = PerformerProtein(cfg).load_trainer_state(tensors, weights).to(dtype)
    model.data_mode = config.get("data_mode", "")
    model.export_config = config
    return model


def _error(message, status):
    print(f"performer-export: error: {message}", file=sys.stderr)
    return status


def main(argv=None):
    p = argparse.ArgumentParser(prog="performer-export", description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, help="checkpoint file (ckpt-*.h5)")
    p.add_argument("--output", "-o", required=True,
                   help="folder to write: a new or empty one, or a previous export (replaced)")
    p.add_argument("--no-hf-files", action="store_true", help="leave out the transformers glue files")
    a = p.parse_args(argv)
    try:
        with signals_raise():
            out = export(a.checkpoint, a.output, hf_files=not a.no_hf_files)
    except (CheckpointError, ConfigError, OutputPathError) as e:
        return _error(e, 2)
    except OSError as e:
        return _error(e, 1)
    except Interrupted as e:
        return _error(f"{e} (its temporary folder was removed)", 128 + e.signum)
    print(f"performer-export: wrote {out} (model.safetensors, config.json, README.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
