"""The PyTorch user's path, end to end (run by tests/torch/cli_test.cc through ctest).

1. `cact-torch export` the fixture, torch.jit.load it in Python, run it, compare the logits
   with the official fixture logits and, when cact-run is built, with `cact-run --ref`.
2. Edit one attention projection with a small low-rank delta (as a fine-tune would),
   torch.jit.save, `cact-torch import`: only that tensor changes (checked by parsing both
   files here and with `cact-inspect diff` when built), at its original width. One element
   edited: only the CQ group holding it may change bytes.
3. The new file runs: re-exported and run in PyTorch, and with `cact-run --ref` when built
   (the two agree), and the edit moved its logits.
4. Foreign or damaged modules are refused with exit 2 and one clear line.

Tolerance for logits: max|diff| <= 1e-4 x max|reference| (FP32 vs FP32, summation order).
"""
import argparse
import json
import os
import struct
import subprocess
import sys

import numpy as np
import torch

p = argparse.ArgumentParser()
p.add_argument("--bin", required=True, help="directory with cact-torch (and maybe cact-run, cact-inspect)")
p.add_argument("--fixture", required=True, help="fixture case directory")
p.add_argument("--work", required=True, help="scratch directory")
args = p.parse_args()

BIN = lambda name: os.path.join(args.bin, name)
W = lambda name: os.path.join(args.work, name)
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def run(cmd, expect=0):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != expect:
        print("command:", " ".join(cmd), "\nstdout:", r.stdout, "\nstderr:", r.stderr)
    check(r.returncode == expect, f"{os.path.basename(cmd[0])} {cmd[1]} exits {expect}")
    return r


def rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def records(path):
    """(name-less) directory of a .cact: list of (dtype, shape, group, bits, blob bytes)."""
    data = open(path, "rb").read()
    head = struct.unpack_from("<29If", data, 0)
    n, cb = head[1], head[2]
    out = []
    for i in range(n):
        dt, nd, _, s0, s1, s2, s3, off, nb, g, b = struct.unpack_from("<BBHIIIIQQII", data, 120 + 4 * cb + 44 * i)
        out.append((dt, (s0, s1, s2, s3)[:nd], g, b, data[off:off + nb]))
    return data[:120 + 4 * cb], out


source = os.path.join(args.fixture, "model.cact")
tokens = json.load(open(os.path.join(args.fixture, "tokens_s2.json")))["tokens"]
official = np.load(os.path.join(args.fixture, "logits_s2.npy"))
have_run = os.path.exists(BIN("cact-run"))
have_inspect = os.path.exists(BIN("cact-inspect"))

# 1. export, load, run
run([BIN("cact-torch"), "export", source, "-o", W("model.pt")])
model = torch.jit.load(W("model.pt"))
with torch.no_grad():
    logits = model(torch.tensor([tokens]))[0].numpy()
check(logits.shape == official.shape, f"logits shape {logits.shape}")
check(rel(logits, official) <= 1e-4, f"PyTorch logits vs official: {rel(logits, official):.2e}")
names = [n for n, _ in model.named_parameters()]
check("layer01.q_proj" in names and "embedding" in names, "parameters carry canonical names")
if have_run:
    run([BIN("cact-run"), source, "--ref", "--tokens", ",".join(map(str, tokens)), "--logits", W("ref.npy")])
    ref = np.load(W("ref.npy"))
    check(rel(logits, ref) <= 1e-4, f"PyTorch logits vs cact-run --ref: {rel(logits, ref):.2e}")
else:
    print("note: cact-run not built; compared with the fixture logits only")

# 2. a low-rank edit of one attention projection, saved and imported
target = "layer01.q_proj"
w = model.layer01.q_proj
g = torch.Generator().manual_seed(7)
a = torch.randn(w.shape[0], 2, generator=g)
b = torch.randn(2, w.shape[1], generator=g)
delta = a @ b
delta *= 0.05 * w.detach().norm() / delta.norm()
with torch.no_grad():
    w.add_(delta)
torch.jit.save(model, W("edited.pt"))
r = run([BIN("cact-torch"), "import", W("edited.pt"), "-o", W("edited.cact"), "--json"])
report = json.loads(r.stdout)
changed = [t for t in report["tensors"] if t["action"] != "kept"]
check([t["name"] for t in changed] == [target], f"report: only {target} re-encoded ({[t['name'] for t in changed]})")
check(changed and changed[0]["before"] == changed[0]["after"], "re-encoded at its original width")

head_a, recs_a = records(source)
head_b, recs_b = records(W("edited.cact"))
diff_idx = [i for i, (x, y) in enumerate(zip(recs_a, recs_b)) if x != y]
target_idx = json.loads(model.cact_json)["tensors"]
target_idx = [t["index"] for t in target_idx if t["name"] == target][0]
check(head_a == head_b and len(recs_a) == len(recs_b), "same header, codebook and tensor count")
check(diff_idx == [target_idx], f"only directory entry {target_idx} differs in bytes ({diff_idx})")
if have_inspect:
    r = run([BIN("cact-inspect"), "diff", source, W("edited.cact"), "--json"], expect=1)
    d = json.loads(r.stdout)
    check([t["name"] for t in d["tensors"] if t["status"] != "identical"] == [target],
          "cact-inspect diff: only the edited tensor changed")

# 2b. one element of a deployed matrix edited: only the group holding it may change its code
# and norm bytes (every other group keeps its bytes); a larger edit does change them.
def group_ranges(rec, row, col):
    """Byte ranges of the codes and the norm of the CQ group holding (row, col)."""
    dt, shape, g, bits, blob = rec
    out_dim, in_dim = shape
    code_bits = 2 if bits == 5 else bits
    in_pad = (in_dim + g - 1) // g * g
    row_bytes = (in_pad * code_bits + 7) // 8
    gi, groups = col // g, in_pad // g
    c0 = row * row_bytes + gi * g * code_bits // 8
    n0 = out_dim * row_bytes + 2 * (row * groups + gi)
    return [(c0, c0 + g * code_bits // 8), (n0, n0 + 2)]


one = "layer00.q_proj"
one_idx = [t["index"] for t in json.loads(model.cact_json)["tensors"] if t["name"] == one][0]
for size, must_change in [(1e-4, False), (0.5, True)]:
    m1 = torch.jit.load(W("model.pt"))
    with torch.no_grad():
        m1.layer00.q_proj[3, 5] += size
    torch.jit.save(m1, W("one.pt"))
    r = run([BIN("cact-torch"), "import", W("one.pt"), "-o", W("one.cact"), "--json"])
    rep = [t for t in json.loads(r.stdout)["tensors"] if t["action"] != "kept"]
    # (An edit larger than the group's quantization error is new values: quantized, not refitted.)
    check([(t["name"], t["action"], t["groups_reencoded"] + t["groups_quantized"]) for t in rep]
          == [(one, "re-encoded", 1)], f"one element +{size}: {one} re-encoded, one group changed ({rep})")
    _, recs_one = records(W("one.cact"))
    a_blob, b_blob = bytearray(recs_a[one_idx][4]), bytearray(recs_one[one_idx][4])
    changed_group = False
    for lo, hi in group_ranges(recs_a[one_idx], 3, 5):
        changed_group |= a_blob[lo:hi] != b_blob[lo:hi]
        a_blob[lo:hi] = b_blob[lo:hi] = bytes(hi - lo)
    check(a_blob == b_blob, f"one element +{size}: every other group of {one} keeps its bytes")
    check([i for i, (x, y) in enumerate(zip(recs_a, recs_one)) if x != y] in ([one_idx], []),
          f"one element +{size}: no other tensor changes")
    if must_change:
        check(changed_group, f"one element +{size}: the edited group's bytes changed")
        check(rep[0]["survived"] > 0, f"one element +{size}: survived {rep[0]['survived']:.3f}")

# 3. the new file runs: re-exported and run in PyTorch, and in cact-run when built (the two
# must agree like any two FP32 paths); the edit must have reached the logits. (2-bit
# requantization re-rolls the quantization noise of the whole matrix, so the new logits are
# not necessarily closer to the float-edited module's than to the original's.)
run([BIN("cact-torch"), "export", W("edited.cact"), "-o", W("edited2.pt")])
with torch.no_grad():
    new = torch.jit.load(W("edited2.pt"))(torch.tensor([tokens]))[0].numpy()
check(np.isfinite(new).all(), "the new file's logits are finite")
moved = rel(new, logits)
check(moved > 1e-4, f"the edit reached the logits (moved {moved:.2e} of their range)")
if have_run:
    run([BIN("cact-run"), W("edited.cact"), "--ref", "--tokens", ",".join(map(str, tokens)), "--logits", W("new.npy")])
    from_run = np.load(W("new.npy"))
    check(rel(from_run, new) <= 1e-4, f"cact-run --ref on the new file vs PyTorch: {rel(from_run, new):.2e}")
survived = changed[0]["survived"] if changed else 0
print(f"note: |edit|/|W| {changed[0]['edit_rel'] if changed else 0:.3f}, |R-W|/|edit| {survived:.3f}")

# 4. refusals
torch.jit.script(torch.nn.Linear(4, 4)).save(W("foreign.pt"))
r = run([BIN("cact-torch"), "import", W("foreign.pt"), "-o", W("x.cact")], expect=2)
check("not made by cact-torch" in r.stderr and r.stderr.count("\n") == 1, f"foreign module: {r.stderr.strip()}")
m2 = torch.jit.load(W("model.pt"))
m2.layer00.k_proj = torch.nn.Parameter(torch.zeros(3, 5))
torch.jit.save(m2, W("reshaped.pt"))
r = run([BIN("cact-torch"), "import", W("reshaped.pt"), "-o", W("x.cact")], expect=2)
check("layer00.k_proj' has shape [3, 5]" in r.stderr, f"reshaped parameter: {r.stderr.strip()}")
check(not os.path.exists(W("x.cact")), "no output written on error")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
