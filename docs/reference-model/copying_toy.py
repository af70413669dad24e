#!/usr/bin/python3
"""How long a plain GPT takes to learn to copy: a toy with no tokenizer and no data files.
Each sequence is spans of 8-31 random token ids (3..511), each followed by its copy, cut to
T + 1 tokens; a model that copies predicts every copied token after a span's first almost
free, so the loss on those ("copy") against the loss on first halves ("first") measures
copying directly.

  /usr/bin/python3 copying_toy.py BATCH T LR STEPS WIDTH LAYERS [EMBED_STD (default 0.02)]

The model is plain_gpt_copying.py's (pre-norm, learned positions, GELU MLP, 4 heads, tied
output, vocabulary 512) at the given width and depth; AdamW with weight decay 0.1, numpy and torch seed 0, 2
threads. Prints every 50 steps the mean loss of the batch, of its copied tokens and of its
first-half tokens, and the seconds so far. Used with `32 128 1e-3 2400 128 2` (and EMBED_STD
1, torch's default) in tool-call-training.md."""
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from plain_gpt_copying import H, V, Gpt


def batch(rng, b, t):
    """Token ids [b, t + 1] and whether each target (position 1..t) is a copied token."""
    xs, copied = [], []
    for _ in range(b):
        seq, mask = [], []
        while len(seq) < t + 1:
            n = int(rng.integers(8, 32))
            span = list(rng.integers(3, V, n))
            seq += span + span
            # a copy's first token is not predictable from the context; the rest are
            mask += [False] * (n + 1) + [True] * (n - 1)
        xs.append(seq[:t + 1])
        copied.append(mask[1:t + 1])
    return torch.tensor(xs), torch.tensor(copied)


def main():
    if len(sys.argv) not in (7, 8):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        b, t, steps, d, layers = (int(sys.argv[i]) for i in (1, 2, 4, 5, 6))
        lr = float(sys.argv[3])
        std = float(sys.argv[7]) if len(sys.argv) == 8 else 0.02
    except ValueError as e:
        print("copying_toy: %s" % e, file=sys.stderr)
        return 2
    # T >= 32: every sequence then holds a copied target (a span's copy starts by token 32),
    # so no printed mean is over nothing.
    if min(b, steps, d, layers) < 1 or t < 32 or d % H or not lr > 0 or not std > 0:
        print("copying_toy: BATCH, STEPS, LAYERS >= 1, T >= 32, WIDTH a multiple of %d, LR and "
              "EMBED_STD > 0" % H, file=sys.stderr)
        return 2
    torch.manual_seed(0)
    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    model = Gpt(t, d, layers)
    nn.init.normal_(model.tok.weight, std=std)
    nn.init.normal_(model.pos.weight, std=std)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    t0 = time.time()
    for step in range(1, steps + 1):
        x, copied = batch(rng, b, t)
        nll = F.cross_entropy(model(x[:, :-1]).reshape(-1, V), x[:, 1:].reshape(-1),
                              reduction="none").view(b, t)
        loss = nll.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0:
            print("%d all %.3f copy %.3f first %.3f %.0fs" % (
                step, loss.item(), nll[copied].mean().item(), nll[~copied].mean().item(),
                time.time() - t0), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
