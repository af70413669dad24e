#!/usr/bin/python3
"""Oracle for the probe-head test, straight from spec section 3 "Probe heads" in numpy
(float64), on the official exporter's dequantized weights and the official hidden states.

usage: probe_oracle.py FIXTURE_DIR SEQ OUT.json
"""
import json
import sys

import numpy as np

fixture, seq, out = sys.argv[1:4]
tokens = json.load(open(f'{fixture}/tokens_{seq}.json'))['tokens']
hidden = np.load(f'{fixture}/hidden_{seq}.npy').astype(np.float64)  # [L, T, d]
deq = lambda name: np.load(f'{fixture}/official_dequant/{name}.npy').astype(np.float64)
emb = deq('embedding')
d = emb.shape[1]
keep = [t for t, tok in enumerate(tokens) if tok != 0]          # mask PAD tokens
e = emb[tokens] * np.sqrt(d)                                    # [T, d]
cells = np.concatenate([e[None], hidden], axis=0)[:, keep]      # [L+1, T', d]
cells = cells.reshape(-1, d)
result = {}
for head in ('contrastive_head', 'confidence_head'):
    probes, proj, bias = deq(f'{head}.probes'), deq(f'{head}.proj'), deq(f'{head}.bias')
    score = cells @ probes.T / np.sqrt(d)                       # [cells, P]
    w = np.exp(score - score.max(axis=0))
    w /= w.sum(axis=0)
    pooled = (w.T @ cells).reshape(-1)                          # [P*d]
    y = proj @ pooled + bias
    if head == 'contrastive_head':
        y = y / np.linalg.norm(y)
    result[head] = y.tolist()
json.dump(result, open(out, 'w'))
