#!/usr/bin/env python3
"""Independent float64 numpy oracle for `cact-run perplexity` and `cact-run compare`.

It cuts the text's token ids into chunks itself (ctx - 1 tokens each, fed after BOS), gets
each chunk's logits from the official decode where they exist (the first chunk is a prefix
of a fixture sequence: --base-official rows 0..n-1) or else from `cact-run --tokens ...
--logits --path ref` (--other's from --other-path), and scores them with a float64 log-softmax. Prints one JSON object.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np


def chunk_logits(cact_run, model, fed, window, sink, tmp, name, path="ref"):
    out = os.path.join(tmp, name + ".npy")
    cmd = [cact_run, model, "--tokens", ",".join(map(str, fed)), "--logits", out,
           "--path", path]
    if window is not None:
        cmd += ["--window", str(window), "--sink", str(sink)]
    subprocess.run(cmd, check=True, capture_output=True)
    return np.load(out).astype(np.float64)


def log_softmax(x):
    m = x.max(axis=1, keepdims=True)
    return x - (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cact-run", required=True)
    ap.add_argument("--tokens-json", required=True, help="fixture sequence: BOS + the text's ids")
    ap.add_argument("--ctx", type=int, required=True)
    ap.add_argument("--window", type=int)
    ap.add_argument("--sink", type=int, default=0)
    ap.add_argument("--base", required=True)
    ap.add_argument("--base-official", help="official logits of the whole fixture sequence")
    ap.add_argument("--other")
    ap.add_argument("--other-path", default="ref", help="forward path of --other's logits")
    a = ap.parse_args()

    seq = json.load(open(a.tokens_json))["tokens"]
    bos, ids = seq[0], seq[1:]
    per = a.ctx - 1
    nll_b, nll_o, kld, pb, po, same, chunks = [], [], [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for k, start in enumerate(range(0, len(ids), per)):
            chunk = ids[start:start + per]
            fed = [bos] + chunk[:-1]
            if k == 0 and a.base_official:
                base = np.load(a.base_official).astype(np.float64)[:len(fed)]
            else:
                base = chunk_logits(a.cact_run, a.base, fed, a.window, a.sink, tmp, "b%d" % k)
            lb = log_softmax(base)
            rows = np.arange(len(chunk))
            nb = -lb[rows, chunk]
            nll_b.extend(nb)
            chunks.append({"begin": start, "tokens": len(chunk), "nll_sum": float(nb.sum())})
            if a.other:
                other = chunk_logits(a.cact_run, a.other, fed, a.window, a.sink, tmp, "o%d" % k,
                                     a.other_path)
                lo = log_softmax(other)
                nll_o.extend(-lo[rows, chunk])
                p = np.exp(lb)
                kld.extend(np.maximum((p * (lb - lo)).sum(axis=1), 0.0))
                pb.extend(np.exp(lb[rows, chunk]))
                po.extend(np.exp(lo[rows, chunk]))
                same.extend(np.argmax(base, axis=1) == np.argmax(other, axis=1))

    nll_b = np.array(nll_b)
    out = {"tokens_scored": len(nll_b), "chunks": chunks, "nll_mean": nll_b.mean(),
           "ppl": float(np.exp(nll_b.mean()))}
    if a.other:
        nll_o, kld = np.array(nll_o), np.array(kld)
        dp = np.array(po) - np.array(pb)
        out.update({
            "ppl_base": float(np.exp(nll_b.mean())),
            "ppl_other": float(np.exp(nll_o.mean())),
            "ln_ppl_ratio": float((nll_o - nll_b).mean()),
            "nll_correlation": float(np.corrcoef(nll_b, nll_o)[0, 1]),
            "kld_mean": float(kld.mean()),
            "delta_p_mean": float(dp.mean()),
            "delta_p_rms": float(np.sqrt((dp * dp).mean())),
            "top1_agreement": float(np.mean(same)),
        })
        for name, q in [("min", 0), ("p01", 1), ("p05", 5), ("p10", 10), ("median", 50),
                        ("p90", 90), ("p95", 95), ("p99", 99), ("p999", 99.9), ("max", 100)]:
            out["kld_" + name] = float(np.percentile(kld, q))
            out["delta_p_" + name] = float(np.percentile(dp, q))
    json.dump(out, sys.stdout, default=float)


if __name__ == "__main__":
    main()
