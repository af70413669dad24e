"""What a small edit made in PyTorch does to a deployed file, and what reaches the file.

One SGD step (lr 1e-3, next-token loss on one chunk of training text) on every parameter of
`cact-torch export MODEL`, saved and `cact-torch import`ed twice: as an edit (the default:
unchanged CQ groups keep their bytes, changed ones are refitted) and with
--force-requantize (the exporter's rule on every CQ tensor). Then, on held-out text, each
against the original file's logits (all through the exported TorchScript modules, so the
numerics are one implementation's): same top-1 and mean KLD for
  - the float edit alone (the edited module before import),
  - the imported file (re-exported), and the force-requantized one.
Prints a markdown table; --json for the figures.

  /usr/bin/python3 tests/quality/edit_round_trip.py build/tools \\
      docs/reference-model/reference.cact --work /tmp/rt
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import sentencepiece as spm
import torch

p = argparse.ArgumentParser()
p.add_argument("bin", help="directory with cact-torch")
p.add_argument("model", help="the deployed .cact")
p.add_argument("--work", required=True, help="scratch directory")
p.add_argument("--tokenizer", default="quant/data/small_tokenizer.model")
p.add_argument("--manifest", default="docs/reference-model/reference.corpus.tsv",
               help="corpus manifest: the training step reads a train document, scoring the held-out ones")
p.add_argument("--ctx", type=int, default=256)
p.add_argument("--chunks", type=int, default=16)
p.add_argument("--lr", type=float, default=1e-3)
p.add_argument("--json", action="store_true")
args = p.parse_args()
os.makedirs(args.work, exist_ok=True)
W = lambda name: os.path.join(args.work, name)
torch.manual_seed(0)


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"edit_round_trip: {' '.join(cmd)} failed:\n{r.stderr}")
    return r.stdout


def documents(split):
    for line in open(args.manifest):
        if line.startswith("#"):
            continue
        fields = line.rstrip("\n").split("\t")
        if fields[0] == split and os.path.exists(fields[3]):
            yield fields[3]


sp = spm.SentencePieceProcessor(model_file=args.tokenizer)


def tokens_of(split, count):
    ids = []
    for path in documents(split):
        ids += sp.encode(open(path, errors="replace").read())
        if len(ids) >= count:
            break
    if len(ids) < count:
        sys.exit(f"edit_round_trip: fewer than {count} {split} tokens in {args.manifest}")
    return ids[:count]


train = torch.tensor([tokens_of("train", args.ctx)])
held = torch.tensor(tokens_of("heldout", args.ctx * args.chunks)).view(args.chunks, args.ctx)


def logits(module):
    with torch.no_grad():
        return torch.cat([module(held[i:i + 1])[0] for i in range(args.chunks)])


def agreement(ref, other):
    lp, lq = torch.log_softmax(ref, -1), torch.log_softmax(other, -1)
    kld = (lp.exp() * (lp - lq)).sum(-1)
    same = (ref.argmax(-1) == other.argmax(-1)).float().mean().item()
    return {"same_top1": same, "kld_mean": kld.mean().item(), "kld_max": kld.max().item()}


run([os.path.join(args.bin, "cact-torch"), "export", args.model, "-o", W("original.pt")])
original = torch.jit.load(W("original.pt"))
base_logits = logits(original)

# One SGD step on every parameter.
model = torch.jit.load(W("original.pt"))
out = model(train)[0]
loss = torch.nn.functional.cross_entropy(out[:-1], train[0, 1:])
loss.backward()
edit_sq, weight_sq = 0.0, 0.0
with torch.no_grad():
    for prm in model.parameters():
        if prm.grad is not None:
            step = args.lr * prm.grad
            edit_sq += float((step * step).sum())
            weight_sq += float((prm * prm).sum())
            prm -= step
            prm.grad = None
torch.jit.save(model, W("step.pt"))
edit_logits = logits(model)
rows = {"float edit alone (the module before import)": agreement(base_logits, edit_logits)}

reports = {}
for label, extra in [("imported (default: group re-encoding)", []),
                     ("imported with --force-requantize (exporter rule)", ["--force-requantize"])]:
    name = "forced" if extra else "imported"
    rep = json.loads(run([os.path.join(args.bin, "cact-torch"), "import", W("step.pt"),
                          "-o", W(name + ".cact"), "--json"] + extra))
    run([os.path.join(args.bin, "cact-torch"), "export", W(name + ".cact"), "-o", W(name + ".pt")])
    file_logits = logits(torch.jit.load(W(name + ".pt")))
    row = agreement(base_logits, file_logits)
    row["vs_edit"] = agreement(edit_logits, file_logits)
    cq = [t for t in rep["tensors"] if t["before"].startswith("CQ")]
    row["cq_tensors_changed"] = sum(t["action"] != "kept" for t in cq)
    row["cq_tensors"] = len(cq)
    row["groups_kept"] = sum(t.get("groups_kept", 0) for t in cq)
    row["groups_refit"] = sum(t.get("groups_reencoded", 0) for t in cq)
    rows[label] = row

result = {"model": args.model, "loss": float(loss), "lr": args.lr,
          "edit_rel": (edit_sq / weight_sq) ** 0.5, "ctx": args.ctx, "chunks": args.chunks,
          "rows": rows}
if args.json:
    print(json.dumps(result, indent=1))
else:
    print(f"one SGD step, lr {args.lr:g}, |edit|/|W| {result['edit_rel']:.2e}; "
          f"{args.chunks} held-out chunks of {args.ctx} tokens, against the original file\n")
    print("| | same top-1 | KLD mean | KLD max | vs the float edit: same top-1, KLD mean | CQ tensors changed | CQ groups kept / refitted |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, r in rows.items():
        t = f"{r['cq_tensors_changed']} of {r['cq_tensors']}" if "cq_tensors" in r else "-"
        g = f"{r['groups_kept']:,} / {r['groups_refit']:,}" if "cq_tensors" in r else "-"
        v = (f"{100 * r['vs_edit']['same_top1']:.2f} %, {r['vs_edit']['kld_mean']:.2e}"
             if "vs_edit" in r else "-")
        print(f"| {label} | {100 * r['same_top1']:.2f} % | {r['kld_mean']:.2e} | {r['kld_max']:.2e} | {v} | {t} | {g} |")
