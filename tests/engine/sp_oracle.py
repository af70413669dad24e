#!/usr/bin/python3
"""Oracle for the tokenizer tests: libsentencepiece ids and decoded text.

usage: sp_oracle.py MODEL OUT.json FILE...
Each FILE is encoded as raw bytes (invalid UTF-8 included, as the C++ side sees it);
OUT.json gets {"ids": [[...], ...], "decoded": ["...", ...]} in FILE order.
"""
import json
import sys

import sentencepiece as spm

model, out, files = sys.argv[1], sys.argv[2], sys.argv[3:]
sp = spm.SentencePieceProcessor(model_file=model)
ids, decoded = [], []
for f in files:
    with open(f, 'rb') as fh:
        data = fh.read()
    seq = sp.encode(data)
    ids.append(seq)
    decoded.append(sp.decode(seq))
with open(out, 'w', encoding='utf-8') as fh:
    json.dump({'ids': ids, 'decoded': decoded}, fh)
