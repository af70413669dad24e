#!/usr/bin/python3
"""A control for the copying runs: a plain pre-norm GPT (learned positions, LayerNorm, GELU
MLP, no QK norm, no engram, no mHC) of the reference model's width and depth (d 256, 4
layers, 4 heads), trained on the same tokens with the same batch, then the repeat test of
check_copying.py (60 random token ids, then the same 60). If it copies where the Needle block
does not, the block is the obstacle; if neither copies, the data and the budget are.

  /usr/bin/python3 plain_gpt_copying.py TEXT STEPS [TOKENIZER.model (default: the repository's)]

Batch 4 x 256 tokens, AdamW lr 1e-3, weight decay 0.1, torch seed 0, 2 threads; token and
position embeddings drawn with std 0.02 (as cact-torch's and GPT-2's: torch's default of 1
makes the tied output's first logits ~16 wide); the whole of TEXT is tokenized. Prints the
training loss every 50 steps and the repeat test's mean NLL per token, first and repeated."""
import math
import os
import sys
import time

import numpy as np
import sentencepiece
import torch
import torch.nn as nn
import torch.nn.functional as F

from check_copying import make_random_spans

B, T, D, L, H, V = 4, 256, 256, 4, 4, 512


class Block(nn.Module):
    """Pre-norm attention (H heads, causal) and a GELU MLP of width d."""

    def __init__(self, d):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, H, d // H).permute(2, 0, 3, 1, 4)
        a = (q @ k.transpose(-1, -2)) / math.sqrt(d // H)
        a = a.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        x = x + self.o((a.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.n2(x))


class Gpt(nn.Module):
    """Learned positions (up to t), `layers` blocks of width d, output tied to the V-token
    embedding."""

    def __init__(self, t=T, d=D, layers=L):
        super().__init__()
        self.tok, self.pos = nn.Embedding(V, d), nn.Embedding(t, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(layers))
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        h = self.tok(x) + self.pos(torch.arange(x.shape[1]))
        for b in self.blocks:
            h = b(h)
        return self.norm(h) @ self.tok.weight.t()


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    tok = sys.argv[3] if len(sys.argv) == 4 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "../../quant/data/small_tokenizer.model")
    try:
        steps = int(sys.argv[2])
        sp = sentencepiece.SentencePieceProcessor(model_file=tok)
        with open(sys.argv[1]) as f:
            ids = np.array(sp.encode(f.read()), dtype=np.int64)
    except (ValueError, OSError, RuntimeError) as e:
        print("plain_gpt_copying: %s" % e, file=sys.stderr)
        return 2
    if len(ids) <= T + 1:
        print("plain_gpt_copying: %s: %d tokens, a sequence needs %d" % (sys.argv[1], len(ids), T + 2),
              file=sys.stderr)
        return 2
    torch.manual_seed(0)
    torch.set_num_threads(2)
    model = Gpt()
    nn.init.normal_(model.tok.weight, std=0.02)
    nn.init.normal_(model.pos.weight, std=0.02)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    rng, t0 = np.random.default_rng(0), time.time()
    for step in range(1, steps + 1):
        starts = rng.integers(0, len(ids) - T - 1, B)
        x = torch.tensor(np.stack([ids[s:s + T + 1] for s in starts]))
        loss = F.cross_entropy(model(x[:, :-1]).reshape(-1, V), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0:
            print("step %d loss %.4f %.0f s" % (step, loss.item(), time.time() - t0), flush=True)
    with torch.no_grad():
        for s in make_random_spans(3):
            x = torch.tensor([[2] + s + s])
            lp = F.log_softmax(model(x[:, :-1]), -1)[0]
            nll = -lp[torch.arange(120), x[0, 1:]]
            print("60 random tokens: first %.2f, repeated %.2f" % (nll[1:60].mean(), nll[61:].mean()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
