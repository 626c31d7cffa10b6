"""The attention of the trainer's model on one sequence, in plain PyTorch:
q, k, v [H, n, D] of one protein (one segment of a packed sample) -> o [H, n, D].

FAVOR+ (docs/kernels/favor-attention.md): x = D^(-1/4) q, e = W x - |x|^2 / 2,
features exp(e) / sqrt(m); the query's row scale cancels in the normalised
output, so queries use exp(e - max_l e). Keys carry their scale: a key row j
has log-scale c_j = max_l e_jl, and row i of a causal sequence reads every
key at the strictly causal scale M_i = max_{j <= i} c_j (no maximum over
later keys, so a large later key cannot underflow earlier rows); a
bidirectional sequence uses the maximum over all its keys.
ReLU (generalized kernel): features relu(W x) + 1e-3, no scale.
elu + 1 (the linear-attention baseline): features elu(q) + 1 of the raw rows
(the stored projection is the identity), no scale.
exp (trained projections): as FAVOR+ with every head's own trained W [H, m, D]
and the -|x|^2 / 2 term only with model.exp_key_norm (queries and keys alike;
for queries it cancels).
Softmax: exact, scale 1 / sqrt(D).

Causal attention is chunked: a running state S [H, m, D + 1] at log-scale s
carries the keys of earlier chunks and each chunk adds its own keys through a
[chunk, chunk] masked product, so memory is O(n m + chunk^2), never n^2: a
35,000-residue protein runs in a few hundred MiB per layer."""

import math

import torch

RELU_EPS = 1e-3


def _scaled(x):
    return x * x.shape[-1] ** -0.25


def favor_logits(x, W, half_norm=True):
    """e = W x - |x|^2 / 2 (without the term when not half_norm) for x = D^(-1/4)
    rows of x [H, n, D]; W [m, D], or [H, m, D] (a projection per head)."""
    x = _scaled(x)
    e = x @ W.transpose(-1, -2)
    return e - 0.5 * (x * x).sum(-1, keepdim=True) if half_norm else e


def _features(kind, x, W, half_norm=False):
    """(features [H, n, m], key log-scales c [H, n]); the true features are exp(c) * features."""
    m = W.shape[-2]
    if kind == "elu":
        return torch.nn.functional.elu(x @ W.t()) + 1.0, None
    if kind == "relu":
        return torch.relu(_scaled(x) @ W.t()) + RELU_EPS, None
    e = favor_logits(x, W, kind == "favor" or half_norm)
    c = e.max(-1).values.detach()  # the features do not depend on it: a constant
    return torch.exp(e - c.unsqueeze(-1)) / math.sqrt(m), c


def _with_ones(v):
    return torch.cat([v, torch.ones_like(v[..., :1])], -1)  # V' = [v 1]: numerator and denominator at once


def linear_attention(kind, q, k, v, W, causal, chunk=128, half_norm=False):
    """FAVOR+ ("favor"), ReLU ("relu"), elu + 1 ("elu") or exp ("exp") attention of q, k, v [H, n, D] with
    projection W [m, D] (exp: [H, m, D], and half_norm for its key term)."""
    fq, _ = _features(kind, q, W, half_norm)
    fk, ck = _features(kind, k, W, half_norm)
    vv = _with_ones(v)  # [H, n, D + 1]
    if not causal:
        if ck is not None:  # every key at the scale of the largest
            fk = fk * torch.exp(ck - ck.max(-1, keepdim=True).values).unsqueeze(-1)
        y = fq @ (fk.transpose(1, 2) @ vv)
        return y[..., :-1] / y[..., -1:]
    H, n, m = fq.shape
    scale = torch.cummax(ck, -1).values if ck is not None else torch.zeros(H, n, dtype=q.dtype, device=q.device)
    S = torch.zeros(H, m, vv.shape[-1], dtype=q.dtype, device=q.device)
    s = torch.full((H, 1), -math.inf, dtype=q.dtype, device=q.device)  # log-scale of S (no keys yet)
    out = []
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        Mi = scale[:, a:b]  # [H, c] each row's causal scale
        if ck is not None:
            w = torch.exp(ck[:, None, a:b] - Mi[:, :, None])  # [H, c(i), c(j)], <= 1 where j <= i
        else:
            w = torch.ones(H, b - a, b - a, dtype=q.dtype, device=q.device)
        A = (fq[:, a:b] @ fk[:, a:b].transpose(1, 2)) * torch.tril(w)
        y = A @ vv[:, a:b] + (fq[:, a:b] @ S) * torch.exp(s - Mi)[..., None]
        out.append(y[..., :-1] / y[..., -1:])
        # The state at the scale of the chunk's last row.
        s_new = Mi[:, -1:]
        wk = torch.exp(ck[:, a:b] - s_new) if ck is not None else torch.ones(H, b - a, dtype=q.dtype, device=q.device)
        S = S * torch.exp(s - s_new)[..., None] + (fk[:, a:b] * wk[..., None]).transpose(1, 2) @ vv[:, a:b]
        s = s_new
    return torch.cat(out, 1)


def softmax_attention(q, k, v, causal, chunk=1024, window=0):
    """Exact attention, scale 1 / sqrt(D), in chunks of query rows (an [chunk, n] score tile at a time);
    window > 0: query i sees only the keys j with |i - j| < window (causal: i - window < j <= i)."""
    H, n, D = q.shape
    out = []
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        scores = (q[:, a:b] @ k.transpose(1, 2)) / math.sqrt(D)
        rows = torch.arange(a, b, device=q.device)[:, None]
        cols = torch.arange(n, device=q.device)[None, :]
        if causal:
            scores = scores.masked_fill(cols > rows, -math.inf)
        if window > 0:
            scores = scores.masked_fill((cols - rows).abs() >= window, -math.inf)
        out.append(torch.softmax(scores, -1) @ v)
    return torch.cat(out, 1)


def attention(kind, q, k, v, W, causal, chunk=128, half_norm=False, window=0, gate=None):
    """q, k, v [H, n, D]. window > 0: softmax over the window alone, or, with a
    linear kind, (1 - s_h) linear + s_h window with s_h = sigmoid(gate[h])."""
    if kind == "softmax":
        return softmax_attention(q, k, v, causal, window=window)
    out = linear_attention(kind, q, k, v, W, causal, chunk, half_norm)
    if window > 0:
        s = torch.sigmoid(gate)[:, None, None]
        out = out + s * (softmax_attention(q, k, v, causal, window=window) - out)
    return out
