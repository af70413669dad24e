#!/usr/bin/python3
"""Check what write_flax_pickles.py wrote, independently of how it wrote it.

Loads our own (non-hostile) pickles, applies the official exporter's FORWARD mapping (Flax
tree -> canonical .cact names) and compares every tensor with the fixture's
weights.safetensors bit for bit (float16 files: against the float16-rounded fixture). Also
checks the numpy-2 global names, the adapter, the merged expectations against a float64
merge, and the manifest. The evil_* files are only searched as bytes, never loaded.
Usage: /usr/bin/python3 check_flax_pickles.py FIXTURE_DIR OUT_DIR   (exit status 1 on failure)
"""

import contextlib
import hashlib
import json
import os
import pickle
import struct
import sys
import time

import numpy as np

PROJS = ("q_proj", "k_proj", "v_proj", "gate_proj", "out_proj")
HEAD_CODES = {"contrastive_head": 1, "confidence_head": 2}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (hlen,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + hlen])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, info in header.items():
        assert info["dtype"] == "F32", (path, name)
        lo, hi = info["data_offsets"]
        out[name] = np.frombuffer(blob[8 + hlen + lo:8 + hlen + hi], "<f4").reshape(info["shape"])
    return out, meta


@contextlib.contextmanager
def numpy2_aliases():
    """Lets numpy 1.24 resolve the numpy 2 module names of its own reconstructors."""
    import numpy.core.multiarray
    import numpy.core.numeric
    alias = {"numpy._core": numpy.core, "numpy._core.multiarray": numpy.core.multiarray,
             "numpy._core.numeric": numpy.core.numeric}
    sys.modules.update(alias)
    try:
        yield
    finally:
        for name in alias:
            del sys.modules[name]


def load(path, numpy2=False):
    with open(path, "rb") as f, (numpy2_aliases() if numpy2 else contextlib.nullcontext()):
        return pickle.load(f)


# ---------------------------------------------------------------- forward (exporter) mapping


def export(params, cfg):
    """The official exporter's mapping: Flax params tree -> canonical name -> array."""
    out = {"embedding": params["embedding"]["embedding"]}
    st = params["stack"]
    b = st["layers"]["block"]
    sa, ha = b["self_attn"], b["hadamard_mlp"]
    for i in range(cfg["num_layers"]):
        p = f"layer{i:02d}."
        out[p + "norm_in"] = b["ZCRMSNorm_0"]["scale"][i]
        for proj in PROJS:
            out[p + proj] = sa[proj]["kernel"][i].T
        out[p + "q_norm"] = sa["q_norm"]["scale"][i]
        out[p + "k_norm"] = sa["k_norm"]["scale"][i]
        out[p + "post_norm"] = b["post_attn_norm"]["scale"][i]
        out[p + "attn_gate"] = b["attn_gate"][i].reshape(1)
        out[p + "pre_hada"] = b["pre_hada_norm"]["scale"][i]
        for k in ("d1", "d2", "d3"):
            out[p + k] = ha[k][i]
    for name in ("mhc_a_pre", "mhc_a_post", "mhc_a_res", "mhc_b_pre", "mhc_b_post", "mhc_b_res"):
        out[name] = st[name]
    for name in ("mhc_phi_pre", "mhc_phi_post", "mhc_phi_res"):
        phi = st[name]
        out[name] = phi.transpose(0, 2, 1).reshape(phi.shape[0] * phi.shape[2], phi.shape[1])
    for s in range(len(cfg["engram_layers"])):
        eg = params[f"engrams_{s}"]
        t = eg["embedding"]
        out[f"engram{s}.tables"] = t.reshape(t.shape[0] * t.shape[1], t.shape[2])
        out[f"engram{s}.key_proj"] = eg["key_proj"]["kernel"].T
        out[f"engram{s}.value_proj"] = eg["value_proj"]["kernel"].T
        out[f"engram{s}.taps"] = eg["taps"]
    out["final_norm"] = st["final_norm"]["scale"]
    codes = []
    for key, code in HEAD_CODES.items():
        if key not in params:
            continue
        h = params[key]
        codes.append(code)
        out[f"{key}.probes"] = h["probes"]
        out[f"{key}.proj"] = h["proj"]["kernel"].T
        bias = h["proj"].get("bias")
        out[f"{key}.bias"] = bias if bias is not None else np.zeros(
            h["proj"]["kernel"].shape[1], h["proj"]["kernel"].dtype)
    if codes:
        out["heads.manifest"] = np.array(codes, np.float32)
    return out


# ---------------------------------------------------------------- checks


class Checker:
    def __init__(self):
        self.failures = []
        self.passed = 0

    def ok(self, cond, what):
        if cond:
            self.passed += 1
        else:
            self.failures.append(what)
            print("FAIL:", what)
        return cond


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def check_checkpoint(ck, ckpt, name, entry, fixture, meta, cfg):
    want_cfg = dict(cfg, weight_bits=meta["bits_map"])
    ck.ok(set(ckpt) == {"format_version", "params", "config", "step", "run"}, f"{name}: keys")
    ck.ok(ckpt["format_version"] == 2 and ckpt["step"] == 1234, f"{name}: version/step")
    ck.ok(ckpt["run"] == f"fixture-{meta['case']}", f"{name}: run")
    ck.ok(ckpt["config"] == want_cfg and type(ckpt["config"]["engram_layers"]) is list,
          f"{name}: config")
    if "confidence_head" in ckpt["params"]:
        ck.ok("bias" not in ckpt["params"]["contrastive_head"]["proj"], f"{name}: no c. bias")
        ck.ok("bias" in ckpt["params"]["confidence_head"]["proj"], f"{name}: conf. bias")
    dtype = np.dtype(entry["dtype"])
    try:
        got = export(ckpt["params"], ckpt["config"])
    except (KeyError, IndexError, ValueError, AttributeError) as err:
        ck.ok(False, f"{name}: exporter mapping failed: {err!r}")
        return
    ck.ok(set(got) == set(fixture), f"{name}: names {set(got) ^ set(fixture)}")
    for key in sorted(set(got) & set(fixture)):
        want = fixture[key].astype(dtype)
        # heads.manifest is derived, never a param: it comes back as float32
        have = got[key] if key != "heads.manifest" else got[key].astype(dtype)
        ck.ok(same_bits(np.ascontiguousarray(have), want), f"{name}: {key} differs")


def check_numpy2_bytes(ck, path, module):
    data = open(path, "rb").read()
    name = os.path.basename(path)
    ck.ok(module.encode() in data, f"{name}: {module} present")
    ck.ok(b"numpy.core" not in data, f"{name}: no numpy.core")
    try:
        load(path)  # must NOT load without the aliases: the names really are numpy 2's
        ck.ok(False, f"{name}: loaded without numpy 2 aliases")
    except ModuleNotFoundError:
        ck.ok(True, "")


def check_adapter(ck, out_dir, params):
    adapters = [load(os.path.join(out_dir, f"adapter_p{p}.pkl")) for p in (2, 4, 5)]
    ad = adapters[1]
    ck.ok(set(ad) == {"lora", "scale", "base", "rank", "seed"}, "adapter: keys")
    ck.ok(type(ad["scale"]) is float and ad["scale"] == 16 / 4 and ad["rank"] == 4,
          "adapter: scale/rank")
    ck.ok(ad["base"] == "checkpoints/needle2.pkl" and ad["seed"] == 0, "adapter: base/seed")
    sa = params["stack"]["layers"]["block"]["self_attn"]
    want_keys = {f"stack/layers/block/self_attn/{p}/kernel" for p in PROJS}
    ck.ok(set(ad["lora"]) == want_keys, "adapter: lora keys")
    for p in PROJS:
        lo = ad["lora"][f"stack/layers/block/self_attn/{p}/kernel"]
        L, n_in, n_out = sa[p]["kernel"].shape
        ck.ok(lo["A"].dtype == np.float32 and lo["A"].shape == (L, n_in, 4), f"adapter: {p} A")
        ck.ok(lo["B"].dtype == np.float32 and lo["B"].shape == (L, 4, n_out), f"adapter: {p} B")
        ck.ok(np.count_nonzero(lo["B"]) == lo["B"].size, f"adapter: {p} B non-zero")
        for other in (adapters[0], adapters[2]):
            o = other["lora"][f"stack/layers/block/self_attn/{p}/kernel"]
            ck.ok(same_bits(o["A"], lo["A"]) and same_bits(o["B"], lo["B"]),
                  f"adapter: {p} same in p2/p4/p5")
    ck.ok(all(a["scale"] == ad["scale"] and a["rank"] == ad["rank"] for a in adapters),
          "adapter: p2/p5 scalars")
    return ad


def f32(x):
    return x.astype(np.float32).astype(np.float64)


def exact_merge(w, a, b, scale, dtype):
    """The official merge, re-derived in float64 with a rounding after every operation.

    A float32 product is exact in float64, and rounding a float64 sum of two float32 (or
    float16) values again is innocuous (53 >= 2 * 24 + 2), so this equals the float32 /
    float16 arithmetic bit for bit without sharing its code. w is cact [out, in]."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    ab = f32(a[:, 0:1] * b[0:1, :])
    for k in range(1, a.shape[1]):
        ab = f32(ab + f32(a[:, k:k + 1] * b[k:k + 1, :]))
    upd = f32(float(np.float32(scale)) * ab).T
    if dtype == "f32":
        return (w.astype(np.float64) + upd).astype(np.float32)
    w16 = w.astype(np.float16).astype(np.float64)
    upd16 = upd.astype(np.float32).astype(np.float16).astype(np.float64)
    return (w16 + upd16).astype(np.float16).astype(np.float32)


def check_merged(ck, out_dir, fixture, adapter, num_layers):
    """Against W + scale * (A @ B) in float64; returns the max abs differences."""
    f16_eps = 2.0 ** -10
    worst = {}
    for dt in ("f32", "f16"):
        merged, _ = read_safetensors(os.path.join(out_dir, f"merged_{dt}.safetensors"))
        want_names = {f"layer{i:02d}.{p}" for i in range(num_layers) for p in PROJS}
        ck.ok(set(merged) == want_names, f"merged_{dt}: names")
        worst[dt] = 0.0
        for name in sorted(want_names & set(merged)):
            i, p = int(name[5:7]), name[8:]
            lo = adapter["lora"][f"stack/layers/block/self_attn/{p}/kernel"]
            a64, b64 = lo["A"][i].astype(np.float64), lo["B"][i].astype(np.float64)
            w = fixture[name].astype(np.float64)
            upd = adapter["scale"] * (a64 @ b64).T
            ref = w + upd
            # rounding-error scale of the float32 rank sum (it may cancel: |A| @ |B|)
            mag = adapter["scale"] * 5 * (np.abs(a64) @ np.abs(b64)).T
            m = merged[name].astype(np.float64)
            ck.ok(m.shape == ref.shape, f"merged_{dt}: {name} shape")
            diff = np.abs(m - ref)
            worst[dt] = max(worst[dt], float(diff.max()))
            ck.ok(np.count_nonzero(merged[name] != fixture[name]) > 0.9 * m.size,
                  f"merged_{dt}: {name} barely changed")
            if dt == "f32":
                tol = 2.0 ** -24 * (2 * np.abs(ref) + mag)
            else:
                m32 = merged[name]
                ck.ok(same_bits(m32.astype(np.float16).astype(np.float32), m32),
                      f"merged_f16: {name} not float16 values")
                # three roundings to float16: W, the update, the sum
                tol = f16_eps * (np.abs(w) + np.abs(upd) + np.abs(ref)) + 3 * 2.0 ** -24 + \
                    2.0 ** -24 * mag
            ck.ok(bool((diff <= tol).all()), f"merged_{dt}: {name} off by {diff.max():.3g}")
            exact = exact_merge(fixture[name], lo["A"][i], lo["B"][i], adapter["scale"], dt)
            ck.ok(same_bits(exact, np.ascontiguousarray(merged[name])),
                  f"merged_{dt}: {name} not the official arithmetic bit for bit")
    return worst


def check_hostile(ck, out_dir, entries):
    needles = {"evil_os_system.pkl": (b"posix", b"system"),
               "evil_eval.pkl": (b"builtins", b"eval"),
               "evil_popen.pkl": (b"subprocess", b"Popen"),
               "evil_exec.pkl": (b"builtins", b"exec")}
    for name, words in needles.items():
        data = open(os.path.join(out_dir, name), "rb").read()  # bytes only: never unpickled
        marker = next(e["marker"] for e in entries if e["file"] == name)
        ck.ok(all(w in data for w in words) and marker.encode() in data,
              f"{name}: payload bytes")
        ck.ok(not os.path.exists(marker), f"{name}: marker {marker} exists")


def check_manifest(ck, out_dir, manifest):
    for e in manifest["files"]:
        data = open(os.path.join(out_dir, e["file"]), "rb").read()
        ck.ok(len(data) == e["bytes"] and hashlib.sha256(data).hexdigest() == e["sha256"],
              f"manifest: {e['file']} size/sha")
    listed = {e["file"] for e in manifest["files"]} | {"manifest.json"}
    present = set(os.listdir(out_dir)) - {"PWNED"}
    ck.ok(listed == present, f"manifest: unlisted/missing {listed ^ present}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.splitlines()[-1])
    fixture_dir, out_dir = sys.argv[1:]
    t0 = time.time()
    ck = Checker()
    fixture, meta = read_safetensors(os.path.join(fixture_dir, "weights.safetensors"))
    cfg = json.loads(meta["config"])
    ck.ok("tokenizer" not in fixture, "fixture: weights.safetensors holds no tokenizer")
    manifest = json.load(open(os.path.join(out_dir, "manifest.json")))
    check_manifest(ck, out_dir, manifest)

    params = None
    ckpts = [e for e in manifest["files"] if e["kind"] == "checkpoint"]
    for e in ckpts:
        path = os.path.join(out_dir, e["file"])
        numpy2 = "numpy_globals" in e
        if numpy2:
            check_numpy2_bytes(ck, path, e["numpy_globals"])
        else:
            ck.ok(b"numpy.core" in open(path, "rb").read(), f"{e['file']}: numpy 1 names")
        ckpt = load(path, numpy2)
        check_checkpoint(ck, ckpt, e["file"], e, fixture, meta, cfg)
        if e["file"] == "ckpt_f32_p4.pkl":
            params = ckpt["params"]
    adapter = check_adapter(ck, out_dir, params)
    worst = check_merged(ck, out_dir, fixture, adapter, cfg["num_layers"])
    check_hostile(ck, out_dir, manifest["files"])

    print(f"{meta['case']}: {len(fixture)} fixture tensors; {len(ckpts)} checkpoints "
          f"({', '.join(e['file'] for e in ckpts)}) map back exactly"
          if not ck.failures else f"{meta['case']}: checkpoints checked")
    print(f"{meta['case']}: merged_f32/f16 equal a float64 re-derivation of the float32/16 "
          f"merge bit for bit; vs the float64 merge max |diff| f32 {worst['f32']:.3g}, "
          f"f16 {worst['f16']:.3g}")
    print(f"{meta['case']}: hostile files hold their payload globals (not loaded), "
          f"markers absent")
    print(f"{meta['case']}: {ck.passed} checks passed, {len(ck.failures)} failed "
          f"({time.time() - t0:.2f} s)")
    sys.exit(1 if ck.failures else 0)


if __name__ == "__main__":
    main()
