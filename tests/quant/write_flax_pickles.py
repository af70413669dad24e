#!/usr/bin/python3
"""Write the pickles the official Needle fine-tuning tools produce, from a fixture's weights.

The official trainer (cactus-compute/needle) saves a pickled dict {format_version, params,
config, step, run} whose "params" is a Flax tree; its exporter maps that tree to the canonical
.cact names. This script applies the INVERSE of the exporter's mapping to a fixture's
weights.safetensors, so the C++ tests can check that cact reads the checkpoints exactly:
float32 checkpoints in protocols 2/4/5, a float16 one (released checkpoints are float16),
numpy-2 variants (globals numpy._core.*), a LoRA adapter in protocols 2/4/5 with the merged
projections it implies (official merge arithmetic, stored as merged_f16/f32.safetensors),
hostile pickles (os.system, eval, Popen, exec: written, never loaded) and manifest.json.
Usage: /usr/bin/python3 write_flax_pickles.py FIXTURE_DIR OUT_DIR [--marker PATH]
"""

import argparse
import builtins
import hashlib
import json
import os
import pickle
import struct
import subprocess
import sys
import types

import numpy as np

PROJS = ("q_proj", "k_proj", "v_proj", "gate_proj", "out_proj")
HEAD_CODES = {"contrastive_head": 1, "confidence_head": 2}
LORA_RANK = 4
LORA_ALPHA = 16.0
LORA_SEED = 7


# ---------------------------------------------------------------- safetensors I/O


def read_safetensors(path):
    """Returns (tensors, metadata); only F32 occurs in the fixtures."""
    with open(path, "rb") as f:
        blob = f.read()
    (hlen,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + hlen])
    meta = header.pop("__metadata__", {})
    base = 8 + hlen
    tensors = {}
    for name, info in header.items():
        assert info["dtype"] == "F32", (name, info["dtype"])
        lo, hi = info["data_offsets"]
        arr = np.frombuffer(blob[base + lo:base + hi], dtype="<f4")
        tensors[name] = arr.reshape(info["shape"]).astype(np.float32)  # own, writable copy
    return tensors, meta


def write_safetensors(path, tensors, metadata):
    """F32 only, tensors in the given order, header padded to 8 bytes like the reference."""
    header = {"__metadata__": metadata}
    offset = 0
    for name, arr in tensors.items():
        assert arr.dtype == np.float32
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
    hbytes = json.dumps(header, separators=(",", ":")).encode()
    hbytes += b" " * (-len(hbytes) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hbytes)))
        f.write(hbytes)
        for arr in tensors.values():
            f.write(np.ascontiguousarray(arr, dtype="<f4").tobytes())


# ---------------------------------------------------------------- inverse exporter mapping


def c(arr):
    # jax.device_get gives C-ordered arrays; a .T view would pickle in Fortran order.
    return np.ascontiguousarray(arr, dtype=np.float32)


def stack(w, L, suffix, transpose=False):
    """Per-layer canonical tensors -> one array with a leading layer axis."""
    parts = [w[f"layer{i:02d}.{suffix}"] for i in range(L)]
    return c(np.stack([p.T if transpose else p for p in parts]))


def build_params(w, cfg):
    L = cfg["num_layers"]
    m = cfg["mhc_lanes"]
    d = cfg["d_model"]
    block = {
        "ZCRMSNorm_0": {"scale": stack(w, L, "norm_in")},
        "self_attn": {p: {"kernel": stack(w, L, p, transpose=True)} for p in PROJS},
        "post_attn_norm": {"scale": stack(w, L, "post_norm")},
        "attn_gate": stack(w, L, "attn_gate").reshape(L),
        "pre_hada_norm": {"scale": stack(w, L, "pre_hada")},
        "hadamard_mlp": {k: stack(w, L, k) for k in ("d1", "d2", "d3")},
    }
    block["self_attn"]["q_norm"] = {"scale": stack(w, L, "q_norm")}
    block["self_attn"]["k_norm"] = {"scale": stack(w, L, "k_norm")}

    st = {"layers": {"block": block}, "final_norm": {"scale": c(w["final_norm"])}}
    for name in ("mhc_a_pre", "mhc_a_post", "mhc_a_res", "mhc_b_pre", "mhc_b_post", "mhc_b_res"):
        st[name] = c(w[name])
    n_c = m * d
    for name, k in (("mhc_phi_pre", m), ("mhc_phi_post", m), ("mhc_phi_res", m * m)):
        # exporter: phi [L, nC, k] -> transpose(0, 2, 1) -> [L*k, nC]
        st[name] = c(w[name].reshape(L, k, n_c).transpose(0, 2, 1))

    params = {"embedding": {"embedding": c(w["embedding"])}, "stack": st}
    slots = cfg["engram_slots"]
    for s in range(len(cfg["engram_layers"])):
        tables = w[f"engram{s}.tables"]
        assert tables.shape[0] % slots == 0
        params[f"engrams_{s}"] = {
            "embedding": c(tables.reshape(tables.shape[0] // slots, slots, tables.shape[1])),
            "key_proj": {"kernel": c(w[f"engram{s}.key_proj"].T)},
            "value_proj": {"kernel": c(w[f"engram{s}.value_proj"].T)},
            "taps": c(w[f"engram{s}.taps"]),
        }
    add_heads(params, w)
    return params


def add_heads(params, w):
    """Probe heads; the manifest is derived from which heads exist, so it is no param."""
    present = [k for k in HEAD_CODES if f"{k}.proj" in w]
    if not present:
        assert "heads.manifest" not in w
        return
    assert list(w["heads.manifest"]) == [HEAD_CODES[k] for k in present], w["heads.manifest"]
    for key in present:
        proj = {"kernel": c(w[f"{key}.proj"].T)}
        bias = w[f"{key}.bias"]
        if key == "contrastive_head":
            assert not bias.any(), "fixture README: the contrastive head has no bias"
        else:
            proj["bias"] = c(bias)
        params[key] = {"probes": c(w[f"{key}.probes"]), "proj": proj}


def map_arrays(tree, fn):
    if isinstance(tree, dict):
        return {k: map_arrays(v, fn) for k, v in tree.items()}
    return fn(tree)


def checkpoint(params, cfg, bits_map, case):
    config = dict(cfg)
    config["weight_bits"] = bits_map
    config["engram_orders"] = list(config["engram_orders"])
    config["engram_layers"] = list(config["engram_layers"])
    return {"format_version": 2, "params": params, "config": config, "step": 1234,
            "run": f"fixture-{case}"}


# ---------------------------------------------------------------- numpy-2 global names


def _stand_in(module, name):
    def fn(*args):
        raise RuntimeError("stand-in for a numpy 2 global; never called")
    fn.__module__, fn.__name__, fn.__qualname__ = module, name, name
    return fn


NP2_FUNCS = {
    "_reconstruct": _stand_in("numpy._core.multiarray", "_reconstruct"),
    "_frombuffer": _stand_in("numpy._core.numeric", "_frombuffer"),
}


class Numpy2Pickler(pickle.Pickler):
    """Reduces ndarrays as numpy 1.24 does, but names the numpy 2 reconstructors."""

    def __init__(self, file, protocol):
        super().__init__(file, protocol=protocol)
        self.protocol = protocol  # the C pickler does not expose its protocol

    def reducer_override(self, obj):
        if type(obj) is not np.ndarray:
            return NotImplemented
        red = obj.__reduce_ex__(self.protocol)
        return (NP2_FUNCS[red[0].__name__],) + tuple(red[1:])


def dump_numpy2(obj, path, protocol):
    # pickle writes a GLOBAL only if it can import it back: provide the modules meanwhile.
    fakes = {"numpy._core": types.ModuleType("numpy._core")}
    for fn in NP2_FUNCS.values():
        mod = fakes.setdefault(fn.__module__, types.ModuleType(fn.__module__))
        setattr(mod, fn.__name__, fn)
    assert not any(name in sys.modules for name in fakes), "numpy 2 is installed?"
    sys.modules.update(fakes)
    try:
        with open(path, "wb") as f:
            Numpy2Pickler(f, protocol=protocol).dump(obj)
    finally:
        for name in fakes:
            del sys.modules[name]
    data = open(path, "rb").read()
    assert b"numpy._core" in data and b"numpy.core" not in data, path


# ---------------------------------------------------------------- LoRA adapter and merge


# A bits map other than the fixtures' checkpoint config, so following it is observable.
QAT_BITS_MAP = "embedding=3,default=4"


def make_adapter(params):
    rng = np.random.default_rng(LORA_SEED)
    lora = {}
    for p in PROJS:
        L, n_in, n_out = params["stack"]["layers"]["block"]["self_attn"][p]["kernel"].shape
        # The official init has B = 0; a non-zero B makes the merge observable.
        a = (rng.standard_normal((L, n_in, LORA_RANK)) * 0.05).astype(np.float32)
        b = (rng.standard_normal((L, LORA_RANK, n_out)) * 0.05).astype(np.float32)
        lora[f"stack/layers/block/self_attn/{p}/kernel"] = {"A": a, "B": b}
    return {"lora": lora, "scale": LORA_ALPHA / LORA_RANK, "base": "checkpoints/needle2.pkl",
            "rank": LORA_RANK, "seed": 0}


def lora_product(a, b):
    """A @ B summed over the rank left to right in float32 (BLAS may reorder the sum)."""
    ab = a[..., :, 0:1] * b[..., 0:1, :]
    for k in range(1, a.shape[-1]):
        ab = ab + a[..., :, k:k + 1] * b[..., k:k + 1, :]
    return ab


def merged_projections(params, adapter, dtype):
    """The official merge W + scale * AB in `dtype`, as cact [out, in] float32 tensors."""
    scale = np.float32(adapter["scale"])  # JAX keeps a Python float weak: float32
    out = {}
    sa = params["stack"]["layers"]["block"]["self_attn"]
    for p in PROJS:
        lo = adapter["lora"][f"stack/layers/block/self_attn/{p}/kernel"]
        w = sa[p]["kernel"].astype(dtype)
        merged = w + (scale * lora_product(lo["A"], lo["B"])).astype(dtype)
        assert merged.dtype == dtype
        for i in range(merged.shape[0]):
            out[f"layer{i:02d}.{p}"] = c(merged[i].T.astype(np.float32))
    return dict(sorted(out.items()))


# ---------------------------------------------------------------- hostile pickles


class _Evil:
    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return (self.fn, self.args)


def hostile_payloads(marker):
    return {
        "evil_os_system.pkl": (os.system, ("touch " + marker,)),
        "evil_eval.pkl": (eval, (f"__import__('os').system('touch {marker}')",)),
        "evil_popen.pkl": (subprocess.Popen, (["touch", marker],)),
        "evil_exec.pkl": (builtins.exec, (f"import os\nos.system('touch {marker}')",)),
    }


def with_payload(ckpt, where, payload):
    """A copy of the checkpoint with the payload before, among or after the arrays."""
    evil = dict(ckpt)
    if where == "format_version":  # the first value, before any array
        evil["format_version"] = payload
    elif where == "params.stack.final_norm.scale":  # in place of an array
        st = dict(evil["params"]["stack"], final_norm={"scale": payload})
        evil["params"] = dict(evil["params"], stack=st)
    else:  # config.act_bits: after every array
        evil["config"] = dict(evil["config"], act_bits=payload)
    return evil


def write_hostile(out_dir, ckpt, marker, files):
    places = ("config.act_bits", "format_version", "config.act_bits",
              "params.stack.final_norm.scale")
    for (name, (fn, args)), where in zip(hostile_payloads(marker).items(), places):
        # pickling only records the reduction (callable, args): nothing runs here
        data = pickle.dumps(with_payload(ckpt, where, _Evil(fn, args)), protocol=4)
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
        files.append({"file": name, "kind": "hostile", "protocol": 4, "dtype": "float16",
                      "payload": f"{fn.__module__}.{fn.__qualname__}", "where": where,
                      "marker": marker})


# ---------------------------------------------------------------- main


def dump(obj, path, protocol):
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=protocol)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fixture_dir", help="a fixture directory (or '-' with --weights)")
    ap.add_argument("out_dir")
    ap.add_argument("--marker", help="absolute path the hostile pickles touch (OUT_DIR/PWNED)")
    ap.add_argument("--weights", help="float weights to use instead of FIXTURE_DIR's (benchmarks: "
                    "any `cact-quant dequant` output; no case.json check)")
    ap.add_argument("--only", help="comma-separated file names: write just these")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None

    def want(name):
        return only is None or name in only
    os.makedirs(args.out_dir, exist_ok=True)
    marker = os.path.abspath(args.marker or os.path.join(args.out_dir, "PWNED"))

    w, meta = read_safetensors(args.weights or
                               os.path.join(args.fixture_dir, "weights.safetensors"))
    cfg = json.loads(meta["config"])
    if not args.weights:
        case_json = json.load(open(os.path.join(args.fixture_dir, "case.json")))
        assert cfg == case_json["config"], "weights.safetensors and case.json disagree"
    case = meta.get("case", "weights")

    params32 = build_params(w, cfg)
    params16 = map_arrays(params32, lambda a: a.astype(np.float16))
    ck32 = checkpoint(params32, cfg, meta["bits_map"], case)
    ck16 = checkpoint(params16, cfg, meta["bits_map"], case)
    files = []

    def ckpt_entry(name, proto, dtype, **extra):
        files.append(dict({"file": name, "kind": "checkpoint", "protocol": proto,
                           "dtype": dtype, "case": case, "config": ck32["config"]}, **extra))

    for proto in (2, 4, 5):
        if want(f"ckpt_f32_p{proto}.pkl"):
            dump(ck32, os.path.join(args.out_dir, f"ckpt_f32_p{proto}.pkl"), proto)
            ckpt_entry(f"ckpt_f32_p{proto}.pkl", proto, "float32")
    if want("ckpt_f16_p4.pkl"):
        dump(ck16, os.path.join(args.out_dir, "ckpt_f16_p4.pkl"), 4)
        ckpt_entry("ckpt_f16_p4.pkl", 4, "float16")
    if want("ckpt_f32_np2.pkl"):
        dump_numpy2(ck32, os.path.join(args.out_dir, "ckpt_f32_np2.pkl"), 4)
        ckpt_entry("ckpt_f32_np2.pkl", 4, "float32", numpy_globals="numpy._core.multiarray")
    if want("ckpt_f32_np2_p5.pkl"):
        dump_numpy2(ck32, os.path.join(args.out_dir, "ckpt_f32_np2_p5.pkl"), 5)
        ckpt_entry("ckpt_f32_np2_p5.pkl", 5, "float32", numpy_globals="numpy._core.numeric")
    if only is not None and not any(n.startswith(("adapter", "merged", "evil")) for n in only):
        finish(args.out_dir, case, files)
        return

    adapter = make_adapter(params32)
    for proto in (2, 4, 5):
        dump(adapter, os.path.join(args.out_dir, f"adapter_p{proto}.pkl"), proto)
        files.append({"file": f"adapter_p{proto}.pkl", "kind": "lora_adapter", "protocol": proto,
                      "dtype": "float32", "rank": LORA_RANK, "scale": adapter["scale"],
                      "seed": LORA_SEED})

    # Adapters of the quantization-aware finetune (official since v2.0.12): the numerics it
    # trained through, which `needle build` deploys; and two with metadata of the wrong type.
    qat = {"adapter_qat_map.pkl": (None, QAT_BITS_MAP), "adapter_qat_w2.pkl": (2, None),
           "adapter_qat_none.pkl": (None, None), "adapter_qat_bad_bits.pkl": ("4", None),
           "adapter_qat_bad_map.pkl": (None, 4)}
    for name, (bits, bits_map) in qat.items():
        dump(dict(adapter, qat_bits=bits, qat_bits_map=bits_map, seed=7),
             os.path.join(args.out_dir, name), 4)
        files.append({"file": name, "kind": "lora_adapter", "protocol": 4, "qat_bits": bits,
                      "qat_bits_map": bits_map})

    # The same adapter in the stacked safetensors layout `cact-quant lora` already reads, so
    # the pickle path can be checked against it byte for byte.
    stacked = {f"{path}/{half}": ab[half] for path, ab in adapter["lora"].items() for half in "AB"}
    write_safetensors(os.path.join(args.out_dir, "adapter_stacked.safetensors"), stacked,
                      {"scale": repr(float(adapter["scale"]))})
    files.append({"file": "adapter_stacked.safetensors", "kind": "lora_adapter_safetensors",
                  "scale": adapter["scale"]})

    for dtype, name in ((np.float16, "merged_f16.safetensors"),
                        (np.float32, "merged_f32.safetensors")):
        merged = merged_projections(params32, adapter, dtype)
        base = "ckpt_f16_p4.pkl" if dtype is np.float16 else "ckpt_f32_p4.pkl"
        write_safetensors(os.path.join(args.out_dir, name), merged,
                          {"case": case, "base": base, "adapter": "adapter_p4.pkl",
                           "merge_dtype": np.dtype(dtype).name})
        files.append({"file": name, "kind": "merged_expectation", "dtype": np.dtype(dtype).name,
                      "base": base, "adapter": "adapter_p4.pkl", "case": case})

    write_hostile(args.out_dir, ck16, marker, files)
    finish(args.out_dir, case, files)


def finish(out_dir, case, files):
    """Sizes and hashes of what was written, in manifest.json."""
    for entry in files:
        data = open(os.path.join(out_dir, entry["file"]), "rb").read()
        entry["bytes"] = len(data)
        entry["sha256"] = hashlib.sha256(data).hexdigest()
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump({"case": case, "numpy": np.__version__, "files": files}, f, indent=1)
    print(f"{case}: wrote {len(files)} files + manifest.json to {out_dir}")


if __name__ == "__main__":
    main()
