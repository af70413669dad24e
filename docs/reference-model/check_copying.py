#!/usr/bin/python3
"""Does a model copy from its context? Mean negative log-likelihood per token (reference path)
of a span the first time and when it is repeated right after: a model that copies predicts
the repeat almost for free.

  - five spans of 60 random token ids (13-511, numpy seed 0), each followed by itself;
  - three sentences with made-up words, each followed by itself.
Exit 2 on bad input (usage, or a model cact-run refuses).
Usage: /usr/bin/python3 check_copying.py CACT_RUN MODEL TOKENIZER.model"""
import io
import subprocess
import sys

import numpy as np
import sentencepiece

SENTENCES = [
    "Permission is granted to copy the zorvanic meltrabex under the krendal terms.",
    "The package bromwell tastrix ships the qualbrin daemon and its vendrel tools.",
    "Send the frobnitz report to Amelia Quenterbury before the Thursday meeting.",
]


def nll(cact_run, model, ids):
    out = subprocess.run([cact_run, model, "--tokens", ",".join(map(str, ids)), "--logits", "-",
                          "--path", "ref"], capture_output=True)
    if out.returncode != 0:
        print("check_copying: %s: cact-run exited %d: %s"
              % (model, out.returncode, out.stderr.decode(errors="replace").strip()), file=sys.stderr)
        sys.exit(2)
    lg = np.load(io.BytesIO(out.stdout)).astype(np.float64)
    m = lg.max(1, keepdims=True)
    lp = lg - m - np.log(np.exp(lg - m).sum(1, keepdims=True))
    return -np.array([lp[i, ids[i + 1]] for i in range(len(ids) - 1)])


def make_random_spans(count):
    """The first `count` spans of 60 random token ids (13-511, numpy seed 0)."""
    rng = np.random.default_rng(0)
    return [rng.integers(13, 512, size=60).tolist() for _ in range(count)]


def first_and_repeat(cact_run, model, spans):
    """Mean NLL of each span's tokens after its first, the first time and repeated (BOS, s, s)."""
    firsts, repeats = [], []
    for s in spans:
        n = len(s)
        x = nll(cact_run, model, [2] + s + s)  # x[i] predicts token i + 1
        firsts.append(x[1:n].mean())
        repeats.append(x[n + 1:].mean())
    return float(np.mean(firsts)), float(np.mean(repeats))


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    cact_run, model, tokenizer = sys.argv[1:]
    random_spans = make_random_spans(5)
    sp = sentencepiece.SentencePieceProcessor(model_file=tokenizer)
    sentence_spans = [sp.encode(s) for s in SENTENCES]
    for name, spans in (("60 random tokens", random_spans), ("sentences", sentence_spans)):
        a, b = first_and_repeat(cact_run, model, spans)
        print("%-16s first %.2f nats/token, repeated %.2f (%+.2f)" % (name, a, b, b - a))
    return 0


if __name__ == "__main__":
    sys.exit(main())
