"""The model configuration, as the trainer resolves it (model/config.h) and
stores it in every checkpoint (the `[model]` table of the root attribute
`config`, TOML)."""

import dataclasses
import math
from dataclasses import dataclass

from .vocab import SIZE as VOCAB_SIZE

ATTENTIONS = ("favor", "relu", "softmax", "elu", "exp")
OBJECTIVES = ("clm", "mlm")
POSITIONALS = ("sinusoidal", "none")
DTYPES = ("f32", "bf16", "f16")
# model.attention_math: the trainer's CUDA attention arithmetic; this package
# computes in fp32 whatever it says (as the trainer's CPU backend does).
ATTENTION_MATHS = ("auto", "fp32", "tf32", "bf16")
# The upper bounds of model/config.cc: far above any trainable model, they keep
# every tensor's element count inside int64 (and a configuration's tensors
# countable before any is allocated).
MAX = {"layers": 1 << 10, "width": 1 << 16, "ffn": 1 << 20, "features": 1 << 16, "chunk": 1 << 20,
       "window": 1 << 40, "feature_draw": 1 << 31}


class ConfigError(ValueError):
    """A configuration this package cannot run; the message names the key."""


@dataclass(frozen=True)
class ModelConfig:
    layers: int = 2
    width: int = 128
    heads: int = 4
    ffn: int = 512
    features: int = 64
    attention: str = "favor"
    exp_key_norm: bool = False
    objective: str = "clm"
    positional: str = "sinusoidal"
    redraw_interval: int = 0
    feature_draw: int = 0
    projection: str = "orthogonal"
    feature_scaling: str = "chi"
    chunk: int = 128
    window: int = 0
    checkpoint_activations: bool = False
    init_std: float = 0.02
    mlm_probability: float = 0.15
    seed: int = 1234
    dtype: str = "f32"
    attention_math: str = "auto"
    vocab: int = VOCAB_SIZE

    @property
    def head_dim(self):
        return self.width // self.heads

    @property
    def causal(self):
        return self.objective == "clm"

    def validate(self):
        """The checks of ModelConfig::validate (model/config.cc), with its
        bounds, and each value of the type its key takes (config.json and a
        checkpoint's TOML can hold anything): ConfigError naming the key."""
        def need(ok, key, what):
            if not ok:
                raise ConfigError(f"model.{key} = {getattr(self, key)!r}: {what}")
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.type is int:
                need(isinstance(value, int) and not isinstance(value, bool), f.name, "must be an integer")
            elif f.type is float:
                need(isinstance(value, (int, float)) and not isinstance(value, bool), f.name, "must be a number")
            else:
                need(isinstance(value, f.type), f.name, f"must be a {f.type.__name__}")
        need(self.attention in ATTENTIONS, "attention", f"must be one of {', '.join(ATTENTIONS)}")
        need(self.objective in OBJECTIVES, "objective", f"must be one of {', '.join(OBJECTIVES)}")
        need(self.positional in POSITIONALS, "positional", f"must be one of {', '.join(POSITIONALS)}")
        need(self.dtype in DTYPES, "dtype", f"must be one of {', '.join(DTYPES)}")
        need(self.attention_math in ATTENTION_MATHS, "attention_math", f"must be one of {', '.join(ATTENTION_MATHS)}")
        features_max = MAX["features"] if self.attention != "softmax" else None  # softmax has no features
        for key, low, high in (("layers", 1, MAX["layers"]), ("width", 1, MAX["width"]), ("heads", 1, None),
                               ("ffn", 1, MAX["ffn"]), ("features", 1, features_max), ("vocab", 2, None),
                               ("chunk", 1, MAX["chunk"]), ("window", 0, MAX["window"] - 1),
                               ("redraw_interval", 0, None), ("feature_draw", 0, MAX["feature_draw"] - 1),
                               ("seed", -(1 << 63), (1 << 64) - 1)):  # uint64, stored as int64 in TOML
            value = getattr(self, key)
            need(low <= value and (high is None or value <= high), key,
                 f"out of range: must be >= {low}" if high is None else f"out of range: must be in [{low}, {high}]")
        need(math.isfinite(self.init_std) and self.init_std > 0, "init_std", "must be finite and > 0")
        need(0 < self.mlm_probability < 1, "mlm_probability", "must be in (0, 1)")
        need(self.width % self.heads == 0, "width", f"must be a multiple of model.heads = {self.heads}")
        need(self.attention != "elu" or self.features == self.width // self.heads, "features",
             "must equal the head dimension with model.attention = elu")
        need(self.attention != "exp" or (self.redraw_interval == 0 and self.feature_draw == 0), "attention",
             "exp trains its projections: model.redraw_interval and model.feature_draw must be 0")
        need(not self.exp_key_norm or self.attention == "exp", "exp_key_norm", "applies to model.attention = exp only")
        return self

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, table, where="model"):
        """From a `[model]` table (the checkpoint's, or config.json's); an
        unknown key is an error naming it."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(table) - names)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (this package knows "
                              f"{', '.join(sorted(names))}): a newer trainer wrote it?")
        return cls(**table).validate()
