"""The trainer's Performer protein model (model/model.h, model/layer.cc) in
plain PyTorch, for reading, checking and fine-tuning its checkpoints:

    x_0 = sqrt(C) E[ids] + sinusoidal(positions)
    per layer (pre-LN):  mid = x + Out(attention(LN1(x)))
                         x'  = mid + FFN2(gelu_tanh(FFN1(LN2(mid))))
    logits = LN_final(x_L) E^T            (the head is tied to the embedding)

Positions are 0.. along each sample, or, in a packed or family sample, inside
each protein (`positions`); attention runs inside each segment (`segments`):
a protein of a packed sample, a family of a family sample. Gradients come from autograd. With dtype "bf16" or "f16" the
linear layers and the head round their two operands to that type and
accumulate in fp32, as the trainer's mixed precision does (embedding lookup,
layer norms, attention and residuals stay fp32)."""

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from . import vocab
from .attention import attention
from .checkpoint import check_names, check_shape, read_checkpoint
from .config import ModelConfig
from .pretrained import read_pretrained

LAYERNORM_EPS = 1e-5
_LOWP = {"bf16": torch.bfloat16, "f16": torch.float16}


def sinusoidal(positions, width, dtype):
    """pe(p)[c] = sin(p f_c) (c even), cos(p f_c) (c odd), f_c = 10000^(-(c - c mod 2) / C)
    (kernels/positional/positional_math.h), computed in float64."""
    c = torch.arange(width, dtype=torch.float64, device=positions.device)
    freq = torch.exp(-math.log(10000.0) * (c - torch.remainder(c, 2)) / width)
    angle = positions.to(torch.float64)[..., None] * freq
    pe = torch.where(torch.remainder(c, 2) == 1, torch.cos(angle), torch.sin(angle))
    return pe.to(torch.float32).to(dtype)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


class Linear(nn.Module):
    """y = x W^T + b with W [out, in], named as the trainer names them."""

    def __init__(self, fan_in, fan_out, bias=True):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(fan_out, fan_in))
        self.bias = nn.Parameter(torch.zeros(fan_out)) if bias else None

    def forward(self, x, lowp=None):
        w = self.weight
        if lowp is not None:  # 16-bit operands, fp32 accumulation
            x, w = x.to(lowp).to(x.dtype), w.to(lowp).to(w.dtype)
        return F.linear(x, w, self.bias)


class LayerNorm(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(width))
        self.beta = nn.Parameter(torch.zeros(width))

    def forward(self, x):
        return F.layer_norm(x, x.shape[-1:], self.gamma, self.beta, LAYERNORM_EPS)


class Layer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        C = cfg.width
        self.cfg = cfg
        self.ln1, self.ln2 = LayerNorm(C), LayerNorm(C)
        self.qkv, self.out = Linear(C, 3 * C), Linear(C, C)
        self.ffn1, self.ffn2 = Linear(C, cfg.ffn), Linear(cfg.ffn, C)
        # The layer's random projection [m, D] (favor, relu, elu): stored with the
        # checkpoint, never trained; exp: every head's trained projection [H, m, D].
        if cfg.attention == "exp":
            self.features = nn.Parameter(torch.zeros(cfg.heads, cfg.features, cfg.head_dim))
        else:
            self.register_buffer("projection", torch.zeros(cfg.features, cfg.head_dim))
        # model.window with a linear kind: the per-head gates of the local window.
        self.gate = nn.Parameter(torch.zeros(cfg.heads)) if cfg.window > 0 and cfg.attention != "softmax" else None
        self.lowp = None  # set by PerformerProtein.set_precision

    def mix(self, h, segments):
        """Attention of h [B, n, C] (after LN1), each segment of each sample on its own."""
        cfg = self.cfg
        B, n, C = h.shape
        H, D = cfg.heads, cfg.head_dim
        qkv = self.qkv(h, self.lowp).view(B, n, 3, H, D).permute(2, 0, 3, 1, 4)  # [3, B, H, n, D]
        q, k, v = qkv[0], qkv[1], qkv[2]
        rows = []
        for b in range(B):
            W = self.features if cfg.attention == "exp" else self.projection
            parts = [attention(cfg.attention, q[b, :, s:e], k[b, :, s:e], v[b, :, s:e], W, cfg.causal, cfg.chunk,
                               cfg.exp_key_norm, cfg.window, self.gate) for s, e in segments[b]]
            rows.append(torch.cat(parts, 1))
        o = torch.stack(rows).permute(0, 2, 1, 3).reshape(B, n, C)
        return self.out(o, self.lowp)

    def forward(self, x, segments):
        mid = x + self.mix(self.ln1(x), segments)
        h1 = self.ffn1(self.ln2(mid), self.lowp)
        if self.lowp is not None:  # GELU of the rounded pre-activation, as the trainer keeps it
            h1 = h1.to(self.lowp).to(h1.dtype)
        return mid + self.ffn2(gelu_tanh(h1), self.lowp)


class PerformerProtein(nn.Module):
    """The model of a checkpoint. Load one with `from_checkpoint` (HDF5) or
    `from_pretrained` (an export folder); parameters are named as in the
    checkpoint (`embedding`, `layer0.qkv.weight`, ..., `final_ln.beta`)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg.validate()
        self.embedding = nn.Parameter(torch.zeros(cfg.vocab, cfg.width))
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.layers))
        self.final_ln = LayerNorm(cfg.width)
        self.set_precision(cfg.dtype if cfg.dtype != "f32" else None)

    def set_precision(self, dtype: Optional[str]):
        """None (or "f32"): plain fp32/fp64 linear layers; "bf16"/"f16": the
        trainer's mixed-precision rounding of their operands."""
        self.lowp = _LOWP.get(dtype) if dtype else None
        for layer in self.layers:
            layer.lowp = self.lowp
        return self

    # ---- loading ------------------------------------------------------------------
    def trainer_state(self):
        """name -> tensor as the trainer names them: parameters and projections."""
        out = {"embedding": self.embedding, "final_ln.gamma": self.final_ln.gamma,
               "final_ln.beta": self.final_ln.beta}
        for l, layer in enumerate(self.layers):
            for part in ("ln1", "ln2"):
                out[f"layer{l}.{part}.gamma"] = getattr(layer, part).gamma
                out[f"layer{l}.{part}.beta"] = getattr(layer, part).beta
            for part in ("qkv", "out", "ffn1", "ffn2"):
                out[f"layer{l}.{part}.weight"] = getattr(layer, part).weight
                out[f"layer{l}.{part}.bias"] = getattr(layer, part).bias
            if layer.gate is not None:
                out[f"layer{l}.attn.gate"] = layer.gate
            if self.config.attention == "exp":
                out[f"layer{l}.attn.features"] = layer.features
            elif self.config.attention != "softmax":
                out[f"projections.layer{l}"] = layer.projection
        return out

    def load_trainer_state(self, tensors, where):
        """Copies every tensor of trainer_state() from `tensors` (numpy or torch);
        ValueError naming `where` and the tensor when one is missing, misshapen
        or not in the model (checkpoint.py's rules)."""
        state = self.trainer_state()
        check_names(where, tensors, state, "the tensors are another model's", owner="this model")
        with torch.no_grad():
            for name, dst in state.items():
                src = torch.as_tensor(tensors[name])
                check_shape(where, name, src.shape, dst.shape, needs="the model needs")
                dst.copy_(src)
        return self

    @classmethod
    def from_checkpoint(cls, path, dtype=torch.float32):
        ck = read_checkpoint(path)
        tensors = dict(ck.params)
        tensors.update({f"projections.layer{l}": w for l, w in enumerate(ck.projections)})
        model = cls(ck.config).load_trainer_state(tensors, path).to(dtype)
        model.checkpoint = ck
        return model

    @classmethod
    def from_pretrained(cls, folder, dtype=torch.float32):
        """The model of an export folder (export.py writes it), its files
        checked by pretrained.read_pretrained before any tensor is read."""
        cfg, tensors, config, weights = read_pretrained(folder)
        model = cls(cfg).load_trainer_state(tensors, weights).to(dtype)
        model.data_mode = config.get("data_mode", "")
        model.export_config = config
        return model

    # ---- the function -------------------------------------------------------------
    def embed_tokens(self, ids, positions):
        C = self.config.width
        x = self.embedding[ids] * math.sqrt(C)
        if self.config.positional == "sinusoidal":
            x = x + sinusoidal(positions, C, x.dtype)
        return x

    def hidden_states(self, ids, positions=None, segments=None, layer=None):
        """Hidden states [B, n, C] after `layer` layers: 0 the scaled embedding
        plus positions, l in [1, L] the output of layer l, L + 1 (the default)
        the final LayerNorm, the rows the head reads.
          ids        [B, n] token ids
          positions  [B, n] positions fed to the encoding (default 0..n-1)
          segments   per sample, the [begin, end) row ranges of its proteins
                     (packed samples); default one segment per sample"""
        L = self.config.layers
        layer = L + 1 if layer is None else layer
        if not 0 <= layer <= L + 1:
            raise ValueError(f"layer must be in [0, {L + 1}] for a {L}-layer model, got {layer}")
        ids = torch.as_tensor(ids, dtype=torch.long)
        if ids.dim() == 1:
            ids = ids[None]
        B, n = ids.shape
        if positions is None:
            positions = torch.arange(n).expand(B, n)
        positions = torch.as_tensor(positions, dtype=torch.long)
        if segments is None:
            segments = [[(0, n)]] * B
        x = self.embed_tokens(ids, positions)
        for l in range(min(layer, L)):
            x = self.layers[l](x, segments)
        return self.final_ln(x) if layer == L + 1 else x

    def head(self, h):
        w = self.embedding
        if self.lowp is not None:
            h, w = h.to(self.lowp).to(h.dtype), w.to(self.lowp).to(w.dtype)
        return h @ w.t()

    def forward(self, ids, positions=None, segments=None):
        """Logits [B, n, V]."""
        return self.head(self.hidden_states(ids, positions, segments))

    def loss_sum(self, logits, targets):
        """Sum of the token cross-entropies over targets != -1 (the trainer's loss_sum) and their count."""
        targets = torch.as_tensor(targets, dtype=torch.long, device=logits.device)
        flat = logits.reshape(-1, logits.shape[-1])
        return F.cross_entropy(flat, targets.reshape(-1), ignore_index=-1, reduction="sum"), int(
            (targets != -1).sum())


def packed_layout(piece_sample, piece_begin, piece_position, B, n, piece_joins=None):
    """positions [B, n] and segments of a packed or family batch from its pieces
    (model/packed_layout.h). Positions restart at each piece's `position`; a
    piece whose `piece_joins` is true (a family member after the first)
    continues the attention segment of the piece before it, so the segments are
    the state segments: one per protein in a packed batch, one per family in a
    family batch."""
    positions = torch.zeros(B, n, dtype=torch.long)
    segments = [[] for _ in range(B)]
    joins = piece_joins if piece_joins is not None else [0] * len(piece_sample)
    pieces = sorted(zip(piece_sample, piece_begin, piece_position, joins))
    for i, (b, begin, pos, join) in enumerate(pieces):
        end = pieces[i + 1][1] if i + 1 < len(pieces) and pieces[i + 1][0] == b else n
        positions[b, begin:end] = torch.arange(pos, pos + end - begin)
        if join and segments[b]:
            segments[b][-1] = (segments[b][-1][0], int(end))
        else:
            segments[b].append((int(begin), int(end)))
    return positions, segments


__all__ = ["PerformerProtein", "packed_layout", "sinusoidal", "vocab"]
