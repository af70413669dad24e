"""Seed corpora for the fuzz targets, from the fixtures and make_fuzz_seeds' small models.
Run by build_fuzzers.sh with CACT_BUILD (build dir) and CACT_ROOT (repository) set."""
import json
import os
import shutil
import struct

build = os.environ["CACT_BUILD"]
root = os.environ["CACT_ROOT"]
fixtures = os.path.join(root, "..", "shared", "fixtures")
corpus = os.path.join(build, "corpus")
shutil.rmtree(corpus, ignore_errors=True)


def put(target, name, data):
    d = os.path.join(corpus, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def tokenizer_blob(model):
    """The RAW tokenizer record (the last directory entry) of a .cact file."""
    n = struct.unpack_from("<I", model, 4)[0]
    cb = struct.unpack_from("<I", model, 8)[0]
    rec = 120 + 4 * cb + 44 * (n - 1)
    offset, nbytes = struct.unpack_from("<QQ", model, rec + 20)
    return model[offset:offset + nbytes]


def safetensors(entries, meta=None):
    header, blob = {}, b""
    for name, dtype, shape, data in entries:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    if meta:
        header["__metadata__"] = meta
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + blob


def small_weights(st):
    """The fixture's metadata and its small tensors (<= 2 KB each), re-packed: a realistic
    header without megabytes of data to mutate."""
    n = struct.unpack_from("<Q", st, 0)[0]
    header = json.loads(st[8:8 + n])
    entries = []
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        if end - b <= 2048:
            entries.append((name, e["dtype"], e["shape"], st[8 + n + b:8 + n + end]))
    return safetensors(entries, header.get("__metadata__"))


micro = sorted(f for f in os.listdir(build) if f.startswith("micro_"))
for f in micro:
    data = read(os.path.join(build, f))
    if f.endswith(".cact"):
        put("fuzz_cact_file", f, data)
        put("fuzz_engine_forward", f, data)
        put("fuzz_file_bytes", f, data)
        put("fuzz_tokenizer_blob", f + ".tok", tokenizer_blob(data))
    elif f.endswith(".zst"):
        put("fuzz_file_bytes", f, data)
    elif f.endswith(".safetensors"):
        put("fuzz_quant_build", f, data)
    elif f.endswith(".bin"):
        put("fuzz_tokenizer_blob", f, data)

for kase in ("tiny", "odd"):
    model = read(os.path.join(fixtures, kase, "model.cact"))
    # The 200 KB fixtures are swept deterministically by tests/reliability; as fuzz seeds
    # they would slow every execution down 20x, so the .cact fuzzers start from the small
    # models (same record kinds, widths, groups, heads).
    put("fuzz_tokenizer_blob", kase + ".tok", tokenizer_blob(model))
    put("fuzz_safetensors", kase + "_small.safetensors",
        small_weights(read(os.path.join(fixtures, kase, "weights.safetensors"))))
    cases = json.load(open(os.path.join(fixtures, kase, "tokenizer_cases.json")))
    items = cases if isinstance(cases, list) else cases.get("cases", [])
    for i, c in enumerate(items):
        text = c["text"] if isinstance(c, dict) else str(c)
        put("fuzz_tokenizer_encode", "%s_%02d" % (kase, i),
            bytes([0 if kase == "tiny" else 1]) + text.encode("utf-8"))


put("fuzz_safetensors", "small_f32", safetensors(
    [("a", "F32", [2, 2], struct.pack("<4f", 1, -2, 3.5, 0)), ("b", "F32", [], struct.pack("<f", 7))],
    {"config": "{}", "seed": "0"}))
put("fuzz_safetensors", "small_f16_bf16", safetensors(
    [("h", "F16", [3], struct.pack("<3H", 0x3C00, 0x7C00, 0x0001)),
     ("g", "BF16", [1, 2], struct.pack("<2H", 0x3F80, 0xFF80)), ("z", "F32", [0, 4], b"")]))

for i, s in enumerate(["embedding=4,mhc=4,default=2", "default=2", "embedding=4,mhc=3,default=2",
                       "attn.q_proj=4, engram=1.58 ,default=3,", "engram1.tables=2,attn=3,default=1.58",
                       "a=2,,default=4", "layer03.q_proj=4,default=2", "mhc=5,default=2", "default=2,default=3"]):
    put("fuzz_scheme", "scheme_%02d" % i, s.encode())

for i, s in enumerate(["reference", "tiny", "reference,layers=8,d=384", "tiny,sites=0+1",
                       "reference,heads=8,kv_heads=2,head_dim=32", "tiny,lanes=2,slots=64", "x,d=1"]):
    put("fuzz_geometry_spec", "geometry_%02d" % i, s.encode())

# Tools files (the engine test's catalogues and refused files), each followed by a NUL and
# bytes that drive fuzz_tool_catalog's walk through the grammar.
walk = bytes(range(7, 256, 3))
with open(os.path.join(root, "tests", "engine", "data", "tool_schemas.json"), encoding="utf-8") as f:
    for catalog in json.load(f)["catalogs"]:
        text = json.dumps(catalog["tools"], ensure_ascii=False).encode()
        put("fuzz_tool_catalog", "catalog_" + catalog["id"], text + b"\0" + walk)
bad_tools = os.path.join(root, "tests", "engine", "data", "bad_tools")
for name in sorted(os.listdir(bad_tools)):
    if name.endswith(".json"):
        put("fuzz_tool_catalog", "bad_" + name, read(os.path.join(bad_tools, name)))
put("fuzz_tool_catalog", "no_tools", b"[]\0" + walk)
put("fuzz_tool_catalog", "any_value", b'[{"name":"f","parameters":{"type":"object","properties":'
    b'{"x":{},"u":{"type":["string","integer","null"]},"e":{"enum":[1,12,"a",[1],{"k":null}]}}}}]'
    b"\0" + walk)

# Fine-tuning JSONL: the unit test's examples (every rendering case) split into small files.
with open(os.path.join(root, "tests", "train", "finetune_examples.jsonl"), "rb") as f:
    examples = [l for l in f.read().splitlines(keepends=True) if len(l) < 2000]
for i in range(0, len(examples), 3):
    put("fuzz_finetune_jsonl", "examples_%02d.jsonl" % i, b"".join(examples[i:i + 3]))
put("fuzz_finetune_jsonl", "errors.jsonl", b'{"query": 5}\n{"query": "q", "answers": {"a": 1}}\n')

# LoRA adapters for the tiny fixture's geometry (d 128, attention 128, kv 64, 4 layers).
def lora_input(flags, config, st):
    c = config.encode()
    return bytes([flags, len(c) & 0xFF, len(c) >> 8]) + c + st


def floats(n, k=0.01):
    return struct.pack("<%df" % n, *[k * ((i * 7919) % 13 - 6) for i in range(n)])


rank = 2
peft = []
for layer, proj, out, inn in [(0, "q", 128, 128), (1, "k", 64, 128), (3, "out", 128, 128)]:
    key = "base_model.model.model.layers.%d.self_attn.%s_proj" % (layer, proj)
    peft.append((key + ".lora_A.weight", "F32", [rank, inn], floats(rank * inn)))
    peft.append((key + ".lora_B.weight", "F32", [out, rank], floats(out * rank, 0.02)))
put("fuzz_lora_adapter", "peft", lora_input(2, '{"r": 2, "lora_alpha": 4}', safetensors(peft)))
put("fuzz_lora_adapter", "peft_rslora", lora_input(
    0, '{"r": 2, "lora_alpha": 4, "use_rslora": true}', safetensors(peft[:2])))
put("fuzz_lora_adapter", "peft_scale", lora_input(3, "", safetensors(peft[2:4])))
stacked = [("q_proj.A", "F32", [4, 128, rank], floats(4 * 128 * rank)),
           ("q_proj.B", "F32", [4, rank, 128], floats(4 * rank * 128, 0.02)),
           ("stack/layers/block/self_attn/v_proj/kernel/A", "F32", [4, 128, rank], floats(4 * 128 * rank)),
           ("stack/layers/block/self_attn/v_proj/kernel/B", "F16", [4, rank, 64], b"\x00\x3c" * (4 * rank * 64))]
put("fuzz_lora_adapter", "stacked", lora_input(0, "", safetensors(stacked, {"scale": "0.5"})))

# Pickles of numpy dicts (written here, never loaded), every protocol: arrays of each dtype,
# C and Fortran order, a 0-d array, scalars, nested containers, an OrderedDict.
import collections
import pickle

import numpy as np

state = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "h": np.ones(3, np.float16),
         "d": np.array(2.5), "i": np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3)),
         "u": np.arange(5, dtype=np.uint8), "b": np.array([True, False]),
         "s": np.float32(1.5), "n": np.int64(3),
         "cfg": collections.OrderedDict([("lr", 0.1), ("steps", [1, 2, (3, None)]), ("name", "x\u00e9")]),
         "big": -(2 ** 40), "raw": b"\x00\xff"}
for proto in range(6):
    put("fuzz_pickle", "numpy_p%d.pkl" % proto, pickle.dumps(state, protocol=proto))
    # fuzz_pickle_writer reads its input as a pickle too (read, written, read back).
    put("fuzz_pickle_writer", "numpy_p%d.pkl" % proto, pickle.dumps(state, protocol=proto))

# fuzz_pickle_writer's recipes (a byte's low 4 bits pick one of 10 kinds; see the target): a
# dict of every scalar kind, a 1,000-item list holding a 1,001-item dict, arrays, a wrong
# array size, a surrogate in a str, a list nested past the depth bound.
put("fuzz_pickle_writer", "recipe_every_kind", bytes(
    [8, 5, 1, 0x61, 0, 1, 0x62, 0x11, 1, 0x63, 0x32] + list(range(8)) +
    [1, 0x64, 3] + list(struct.pack("<d", float("nan"))) + [1, 0x65, 4, 2, 0xC3, 0xA9]))
put("fuzz_pickle_writer", "recipe_batches", bytes([6 | 0x80, 5, 8 | 0x80, 6]))
put("fuzz_pickle_writer", "recipe_arrays", bytes(
    [7, 3, 9, 1, 2, 2, 3] + list(range(24)) + [9, 11, 0, 1, 9, 3, 4, 1, 2, 1, 1, 5, 6]))
put("fuzz_pickle_writer", "recipe_bad_array", bytes([9 | 0x80, 0, 1, 1, 0, 0x3C]))
put("fuzz_pickle_writer", "recipe_bad_str", bytes([4, 3, 0x61, 0xED, 0xA0]))
put("fuzz_pickle_writer", "recipe_deep", bytes([6, 1] * 66 + [2, 5]))

# A micro Needle checkpoint in the official Flax layout (1 layer, d_model 16: every array the
# exporter reads, a few KB) and a rank-1 adapter for the tiny geometry, for the training
# artifact readers.
f16 = np.float16
L, d, kv, lanes, n_tables, slots = 1, 16, 8, 2, 1, 4
block = {"ZCRMSNorm_0": {"scale": np.zeros((L, d), f16)},
         "self_attn": {"q_proj": {"kernel": np.ones((L, d, d), f16)},
                       "k_proj": {"kernel": np.ones((L, d, kv), f16)},
                       "v_proj": {"kernel": np.ones((L, d, kv), f16)},
                       "gate_proj": {"kernel": np.ones((L, d, d), f16)},
                       "out_proj": {"kernel": np.ones((L, d, d), f16)},
                       "q_norm": {"scale": np.zeros((L, 8), f16)},
                       "k_norm": {"scale": np.zeros((L, 8), f16)}},
         "post_attn_norm": {"scale": np.zeros((L, d), f16)}, "attn_gate": np.zeros(L, f16),
         "pre_hada_norm": {"scale": np.zeros((L, d), f16)},
         "hadamard_mlp": {k: np.ones((L, d), f16) for k in ("d1", "d2", "d3")}}
stack = {"layers": {"block": block}, "final_norm": {"scale": np.zeros(d, f16)},
         "mhc_a_pre": np.ones(L, f16), "mhc_a_post": np.ones(L, f16), "mhc_a_res": np.ones(L, f16),
         "mhc_b_pre": np.zeros((L, lanes), f16), "mhc_b_post": np.zeros((L, lanes), f16),
         "mhc_b_res": np.zeros((L, lanes, lanes), f16),
         "mhc_phi_pre": np.ones((L, lanes * d, lanes), f16),
         "mhc_phi_post": np.ones((L, lanes * d, lanes), f16),
         "mhc_phi_res": np.ones((L, lanes * d, lanes * lanes), f16)}
params = {"embedding": {"embedding": np.ones((16, d), f16)}, "stack": stack,
          "engrams_0": {"embedding": np.ones((n_tables, slots, d), f16),
                        "key_proj": {"kernel": np.ones((d, d), f16)},
                        "value_proj": {"kernel": np.ones((d, d), f16)},
                        "taps": np.ones((4, d), f16)},
          "contrastive_head": {"probes": np.ones((1, d), f16),
                               "proj": {"kernel": np.ones((d, 2), f16)}}}
config = {"vocab_size": 16, "d_model": d, "num_heads": 2, "num_kv_heads": 1, "num_layers": L,
          "max_seq_len": 64, "engram_orders": [2], "engram_slots": slots, "engram_layers": [0],
          "mhc_lanes": lanes, "kv_window": 0, "kv_bits": 8, "weight_bits": "default=2"}
ckpt = {"format_version": 2, "params": params, "config": config, "step": 1, "run": "seed"}
rank = 1
adapter = {"lora": {"stack/layers/block/self_attn/q_proj/kernel":
                    {"A": np.ones((4, 128, rank), np.float32), "B": np.ones((4, rank, 128), np.float32)}},
           "scale": 2.0, "base": "seed.pkl", "rank": rank}
for proto in (2, 4, 5):
    put("fuzz_training_pickle", "checkpoint_p%d.pkl" % proto, pickle.dumps(ckpt, protocol=proto))
    put("fuzz_training_pickle", "adapter_p%d.pkl" % proto, pickle.dumps(adapter, protocol=proto))

# Corpus manifests (train/corpus_manifest.h): valid ones and near misses.
header = "# cact corpus manifest v1\n"
rows = ["train\t1048\t%s\t/usr/share/common-licenses/Apache-2.0\n" % ("0123456789abcdef" * 4),
        "heldout\t18\t%s\t/usr/share/doc/pkg/copyright\n" % ("fedcba9876543210" * 4),
        "train\t0\t%s\tdocs/README.md\n" % ("a" * 64)]
for i, text in enumerate([header, header + rows[0], header + "".join(rows), header + rows[1].rstrip("\n"),
                          header + rows[0] + rows[0], header + "train\t01\t%s\t/x\n" % ("b" * 64),
                          "copyright\r\n\n  \tline\n"]):
    put("fuzz_corpus_manifest", "manifest_%02d" % i, text.encode())

for t in sorted(os.listdir(corpus)):
    print("%-24s %d seeds" % (t, len(os.listdir(os.path.join(corpus, t)))))
