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
import os
import sys

import numpy as np
import torch

from . import vocab
from .checkpoint import CheckpointError, read_checkpoint
from .config import ConfigError
from .model import PerformerProtein
from .output_folder import Interrupted, OutputPathError, check_output, new_folder, signals_raise
from .pretrained import FORMAT, FORMAT_VERSION, MODEL_TYPE

TOOL = "performer-export"  # its marker in each export folder: performer-export.json (output_folder.py)
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


def load_pretrained(folder, dtype=torch.float32):
    """The model of an export folder: PerformerProtein.from_pretrained (the
    checks are pretrained.read_pretrained's)."""
    return PerformerProtein.from_pretrained(folder, dtype)


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
