"""Scores and embeddings of proteins, the same quantities as the trainer's
performer-score and performer-embed (launch/infer/scoring.h, embedding.h).

score(): causal models give the exact log-likelihood. With
first_residue="scored" the input is <end> r_1 .. r_n and every residue and the
closing <end> are predicted (n + 1 terms); with "context" the input is
r_1 .. r_n, r_1 is context only (n terms). "auto" chooses as performer-score
does: "scored" for a model trained on concatenated samples (data.mode =
"concat"), "context" otherwise. Masked models give the pseudo-log-likelihood:
for each residue, the input r_1 .. r_n <end> with that residue replaced by
<mask> predicts it (n terms, one forward per residue, `batch` at a time).
score_in_context(): a causal model's log-likelihood of a query given a context
of homologs, as performer-score --context computes it
(launch/infer/context_scoring.h) and a data.mode = "family" model reads a
family: the context members c_1 .. c_K, each its residues then <end> with
positions restarting at 0, then the query r_1 .. r_n at positions 0..n-1, all
in one attention segment; r_1 is predicted from the context's last <end>, r_2
.. r_n and the closing <end> from the query's rows (n + 1 terms). The package
runs context + query in one pass for every query (performer-score's
"one-pass"; its cached mode gives the same numbers). context_gain(): the
difference per token between a query scored given the context and alone, over
the terms both score (performer-score's gain_per_token).
embed(): the input r_1 .. r_n <end> at positions 0..n; the mean over the n
residue rows of the chosen layer's hidden states (summed in float64)."""

import math
from dataclasses import dataclass
from typing import List, Optional

import numpy as np
import torch

from . import vocab


@dataclass
class Score:
    logprob: np.ndarray  # [n + 1] float64: log P of residue 1..n, then of <end>; NaN where not scored
    total: float         # sum of the scored terms
    scored: int          # number of scored terms

    @property
    def perplexity(self):
        return math.exp(-self.total / self.scored) if self.scored else math.nan


def _finish(logprob, scored):
    logprob[~scored] = np.nan
    return Score(logprob=logprob, total=float(logprob[scored].sum()), scored=int(scored.sum()))


def first_residue_of(model, first_residue="auto"):
    if first_residue != "auto":
        if first_residue not in ("scored", "context"):
            raise ValueError(f"first_residue must be auto, scored or context, got {first_residue!r}")
        return first_residue
    mode = getattr(model, "checkpoint", None)
    mode = mode.train_config.get("data", {}).get("mode") if mode is not None else getattr(model, "data_mode", None)
    return "scored" if mode == "concat" else "context"


def _log_softmax(logits):
    return torch.log_softmax(logits.to(torch.float64), -1)


@torch.no_grad()
def score(model, residues: List[int], first_residue="auto", batch=16) -> Score:
    """Score of one protein (residue tokens, no <end>)."""
    n = len(residues)
    if n == 0:
        raise ValueError("cannot score an empty sequence")
    logprob = np.zeros(n + 1)
    scored = np.zeros(n + 1, dtype=bool)
    if model.config.causal:
        lead = first_residue_of(model, first_residue) == "scored"
        tokens = ([vocab.END] if lead else []) + list(residues)
        targets = tokens[1:] + [vocab.END]
        lp = _log_softmax(model(torch.tensor([tokens]))[0])
        slots = np.arange(len(tokens)) + (0 if lead else 1)
        logprob[slots] = lp[torch.arange(len(tokens)), torch.tensor(targets)].numpy()
        scored[slots] = True
        return _finish(logprob, scored)
    tokens = list(residues) + [vocab.END]
    for first in range(0, n, batch):
        rows = list(range(first, min(n, first + batch)))
        ids = torch.tensor([tokens] * len(rows))
        for r, i in enumerate(rows):
            ids[r, i] = vocab.MASK
        lp = _log_softmax(model(ids))
        for r, i in enumerate(rows):
            logprob[i] = float(lp[r, i, tokens[i]])
    scored[:n] = True
    return _finish(logprob, scored)


@torch.no_grad()
def score_in_context(model, context: List[List[int]], residues: List[int]) -> Score:
    """Score of one protein (residue tokens, no <end>) given the context
    proteins before it (each a list of residue tokens)."""
    if not model.config.causal:
        raise ValueError("scoring given a context needs a causal model (objective clm); this one is masked")
    if not context:
        raise ValueError("the context holds no protein")
    n = len(residues)
    if n == 0:
        raise ValueError("cannot score an empty sequence")
    tokens, positions = [], []
    for k, member in enumerate(context):
        if not member:
            raise ValueError(f"context protein {k} is empty")
        tokens += list(member) + [vocab.END]
        positions += list(range(len(member) + 1))
    first = len(tokens) - 1  # the context's last <end>: predicts r_1
    tokens += list(residues)
    positions += list(range(n))
    lp = _log_softmax(model(torch.tensor([tokens]), torch.tensor([positions]), [[(0, len(tokens))]])[0])
    targets = list(residues) + [vocab.END]
    rows = torch.arange(first, first + n + 1)
    logprob = lp[rows, torch.tensor(targets)].numpy().copy()
    return _finish(logprob, np.ones(n + 1, dtype=bool))


def context_gain(given: Score, alone: Score) -> float:
    """Nats per token that the context adds: (log P given the context - log P
    alone) over the terms scored alone, divided by their number."""
    common = ~np.isnan(alone.logprob)
    if not common.any():
        return 0.0
    return float((given.logprob[common].sum() - alone.total) / alone.scored)


@torch.no_grad()
def embed(model, residues: List[int], layer: Optional[int] = None, per_residue=False):
    """(mean [C] float32, residue rows [n, C] or None) of one protein; layer as
    PerformerProtein.hidden_states (default: the final LayerNorm)."""
    n = len(residues)
    if n == 0:
        raise ValueError("cannot embed an empty sequence")
    h = model.hidden_states(torch.tensor([list(residues) + [vocab.END]]), layer=layer)[0, :n]
    mean = h.to(torch.float64).mean(0).to(torch.float32).numpy()
    return mean, (h.to(torch.float32).numpy() if per_residue else None)
