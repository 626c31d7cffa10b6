"""Fine-tuning an exported model in plain PyTorch on a per-protein target made
from the data: the fraction of hydrophobic residues (A I L M F V W) of each
protein, regressed from its mean embedding (the final LayerNorm's rows,
averaged over the residues) by a linear head, the whole model trained with
AdamW. Proteins are cropped to --crop residues (their target is that of the
crop). Prints the held-out (validation split) mean squared error before and
after, and "loss went down" when it did.

    python finetune_composition.py --model export/small --data data/uniprot.h5 [--steps 200]
"""

import argparse
import sys

import numpy as np
import torch
from torch import nn

from performer_protein import ProteinData, load_pretrained, vocab

HYDROPHOBIC = [vocab.token_of(c) for c in "AILMFVW"]


def batches(split, proteins, crop, seed):
    """(ids [N, crop + 1] with <end> and <pad>, residue counts [N], targets [N]) of the first `proteins`."""
    rng = np.random.default_rng(seed)
    rows, lengths, targets = [], [], []
    for i in range(min(proteins, len(split))):
        seq = split.sequence(i)
        if len(seq) > crop:
            start = int(rng.integers(0, len(seq) - crop + 1))
            seq = seq[start:start + crop]
        row = np.full(crop + 1, vocab.PAD, dtype=np.int64)
        row[:len(seq)] = seq
        row[len(seq)] = vocab.END
        rows.append(row)
        lengths.append(len(seq))
        targets.append(np.isin(seq, HYDROPHOBIC).mean())
    return torch.tensor(np.stack(rows)), torch.tensor(lengths), torch.tensor(targets, dtype=torch.float32)


class Regressor(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.head = nn.Linear(model.config.width, 1)

    def forward(self, ids, lengths):
        # One protein per row: its own segment, so padding never enters its
        # attention (bidirectional models would read it otherwise).
        segments = [[(0, int(n) + 1), (int(n) + 1, ids.shape[1])] if n + 1 < ids.shape[1] else [(0, ids.shape[1])]
                    for n in lengths]
        h = self.model.hidden_states(ids, segments=segments)
        mask = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).to(h.dtype)
        mean = (h * mask[..., None]).sum(1) / lengths[:, None].to(h.dtype)
        return self.head(mean).squeeze(-1)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="export folder (performer-export)")
    p.add_argument("--data", required=True, help="data file (performer-data prepare)")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--proteins", type=int, default=512, help="training proteins (from the train split)")
    p.add_argument("--crop", type=int, default=96)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    torch.manual_seed(a.seed)
    model = load_pretrained(a.model).set_precision(None)
    with ProteinData(a.data) as d:
        train = batches(d.split("train"), a.proteins, a.crop, a.seed)
        held = batches(d.split("valid"), 128, a.crop, a.seed + 1)
    reg = Regressor(model)
    with torch.no_grad():  # start the head at the mean target, so the loss measures what the embedding adds
        reg.head.bias.fill_(float(train[2].mean()))
        reg.head.weight.zero_()
    opt = torch.optim.AdamW(reg.parameters(), lr=a.lr, weight_decay=0.01)

    def held_out_mse():
        with torch.no_grad():
            return float(nn.functional.mse_loss(reg(held[0], held[1]), held[2]))

    before = held_out_mse()
    N = len(train[0])
    for step in range(a.steps):
        idx = torch.randint(0, N, (a.batch,))
        loss = nn.functional.mse_loss(reg(train[0][idx], train[1][idx]), train[2][idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % max(1, a.steps // 5) == 0 or step == a.steps - 1:
            print(f"step {step:4d}  train mse {float(loss):.5f}", flush=True)
    after = held_out_mse()
    print(f"held-out mse before {before:.5f}, after {after:.5f} ({len(held[0])} validation proteins)")
    if after < before:
        print("loss went down")
        return 0
    print("the held-out loss did not go down")
    return 1


if __name__ == "__main__":
    sys.exit(main())
