"""performer_protein: checkpoints of the Performer protein trainer in PyTorch.

    from performer_protein import PerformerProtein, score, embed
    model = PerformerProtein.from_checkpoint("runs/small/checkpoints/ckpt-000001500.h5")
    logits = model(ids)                         # [B, n, V]
    s = score(model, vocab.encode("MKTAYIAK"))  # log-likelihood, perplexity

See docs/python.md of the project for what is supported."""

from . import vocab
from .checkpoint import Checkpoint, CheckpointError, read_checkpoint
from .config import ConfigError, ModelConfig
from .data import DataFileError, ProteinData
from .export import export, load_pretrained
from .inference import Score, context_gain, embed, score, score_in_context
from .model import PerformerProtein, packed_layout
from .sequences import SequenceFileError, read_sequences

__all__ = ["vocab", "Checkpoint", "CheckpointError", "read_checkpoint", "ConfigError", "ModelConfig",
           "DataFileError", "ProteinData", "export", "load_pretrained", "Score", "context_gain", "embed", "score",
           "score_in_context", "PerformerProtein", "packed_layout", "SequenceFileError", "read_sequences"]
