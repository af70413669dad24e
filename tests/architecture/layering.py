#!/usr/bin/env python3
"""The rooms of docs/architecture.md and what each may include.

Every project include ("lib/...", "engine/kernels/...") in a room's sources must name a room
on that room's list, and the programs (tools/) may include only a room's public headers
(PUBLIC); anything else is reported with the file, the line and the include, and the check
fails. No library room may hold more than MAX_ROOM_SHARE of the library's lines: a room that
big has more than one purpose. Usage: layering.py [SOURCE_DIR]
"""
import pathlib
import re
import subprocess
import sys

# room -> the rooms its files may include. A file belongs to the longest room that
# prefixes its path; an include is judged by the longest room that prefixes it.
RULES = {
    "lib": ["lib"],
    "formats/needle": ["formats/needle", "lib"],
    "formats": ["formats", "formats/needle", "lib"],
    "quant/cq": ["quant/cq", "formats", "formats/needle", "lib"],
    "quant": ["quant", "quant/cq", "formats", "formats/needle", "lib"],
    "quant/import": ["quant/import", "quant", "quant/cq", "formats", "formats/needle", "lib"],
    "engine/kernels": ["engine/kernels", "lib"],
    "engine": ["engine", "engine/kernels", "quant/cq", "formats", "formats/needle", "lib"],
    "engine/text": ["engine/text", "formats", "lib"],
    "engine/eval": ["engine/eval", "engine/text", "engine", "engine/kernels", "quant/cq",
                    "formats", "formats/needle", "lib"],
    "engine/generate": ["engine/generate", "engine/eval", "engine/text", "engine",
                        "engine/kernels", "quant/cq", "formats", "formats/needle", "lib"],
    "engine/toolcall": ["engine/toolcall", "engine/generate", "engine/eval", "engine/text",
                        "engine", "engine/kernels", "quant/cq", "formats", "formats/needle",
                        "lib"],
    "train": ["train", "engine/eval", "engine/text", "engine", "quant/import", "quant",
              "quant/cq", "formats", "formats/needle", "lib"],
    "libtorch": ["libtorch", "train", "engine/eval", "engine/text", "engine", "quant/import", "quant",
                 "quant/cq", "formats", "formats/needle", "lib"],
    "tools/common": ["tools/common", "engine/text", "engine", "engine/kernels", "quant", "formats",
                     "lib"],
    "tools/cact-inspect": ["tools/cact-inspect", "tools/common", "quant/import", "quant",
                           "formats", "lib"],
    "tools/cact-quant": ["tools/cact-quant", "tools/common", "quant/import", "quant", "quant/cq",
                         "formats", "lib"],
    "tools/cact-run": ["tools/cact-run", "tools/common", "train", "engine/toolcall",
                       "engine/generate",
                       "engine/eval", "engine/text", "engine", "engine/kernels", "quant",
                       "formats", "lib"],
    "tools/cact-torch": ["tools/cact-torch", "tools/common", "libtorch", "train", "engine/eval",
                         "engine/text",
                         "engine", "quant", "formats", "lib"],
}
# The public face of each library room: the only headers of it that the programs (tools/)
# may include. Everything else in a room is its own business and may change freely.
PUBLIC = {
    "lib": ["lib/atomic_file.h", "lib/counted.h", "lib/cpu_features.h", "lib/file_bytes.h",
            "lib/file_identity.h", "lib/heap_reserve.h",
            "lib/npy.h", "lib/progress.h", "lib/resources.h", "lib/sha256.h", "lib/status.h"],
    "formats": ["formats/cact/accounting.h", "formats/cact/any_generation.h",
                "formats/cact/cact3_file.h", "formats/cact/cact_file.h",
                "formats/cact/finite_check.h", "formats/cact/geometry3_json.h",
                "formats/cact/geometry_json.h", "formats/cact/writer.h", "formats/pickle.h",
                "formats/safetensors.h", "formats/sentencepiece_model.h",
                "formats/tokenizer_blob.h"],
    "formats/needle": ["formats/needle/geometry.h", "formats/needle/named_geometries.h"],
    "quant/cq": ["quant/cq/codebook.h"],
    "quant": ["quant/build.h", "quant/cact_diff.h", "quant/dequant_export.h",
              "quant/rebuild_report.h", "quant/requant.h", "quant/scheme.h",
              "quant/scheme_inference.h", "quant/scheme_presets.h", "quant/synthetic.h",
              "quant/tensor_values.h", "quant/weights_geometry.h"],
    "quant/import": ["quant/import/flax_checkpoint.h", "quant/import/lora.h"],
    "engine": ["engine/fast_forward.h", "engine/forward.h", "engine/forward_paths.h",
               "engine/model.h"],
    "engine/kernels": ["engine/kernels/cq_kernels.h", "engine/kernels/fast_ops.h",
                       "engine/kernels/isa.h", "engine/kernels/team.h"],
    "engine/text": ["engine/text/chat_template.h", "engine/text/python_json.h",
                    "engine/text/tokenizer.h"],
    "engine/eval": ["engine/eval/perplexity.h"],
    "engine/generate": ["engine/generate/runner.h", "engine/generate/prefix_reuse.h",
                        "engine/generate/prompt_cache.h"],
    "engine/toolcall": ["engine/toolcall/tool_call_eval.h", "engine/toolcall/tool_call_runner.h"],
    "train": ["train/corpus_manifest.h", "train/finetune_data.h", "train/geometry_spec.h",
              "train/loss_curve.h", "train/official_adapter.h", "train/trained_model.h", "train/training_data.h"],
    "libtorch": ["libtorch/blas_threads.h", "libtorch/bridge.h", "libtorch/finetune.h",
                 "libtorch/torch_module.h", "libtorch/trainer.h"],
}
MAX_ROOM_SHARE = 0.30
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def room_of(path):
    best = None
    for room in RULES:
        if path == room or path.startswith(room + "/"):
            if best is None or len(room) > len(best):
                best = room
    return best


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2])
    files = subprocess.run(["git", "ls-files", "lib", "formats", "quant", "engine", "train", "libtorch",
                            "tools"],
                           cwd=root, capture_output=True, text=True, check=True).stdout.split()
    files = [f for f in files if f.endswith((".cc", ".h"))]
    errors = []
    for f in files:
        room = room_of(f)
        if room is None:
            errors.append(f"{f}: in no room of docs/architecture.md")
            continue
        for n, line in enumerate((root / f).read_text().splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = room_of(m.group(1))
            if target is not None and target not in RULES[room]:
                errors.append(f'{f}:{n}: includes "{m.group(1)}": {room} may include only '
                              + ", ".join(RULES[room]))
            elif (room.startswith("tools/") and target in PUBLIC
                  and m.group(1) not in PUBLIC[target]):
                errors.append(f'{f}:{n}: includes "{m.group(1)}", which is not in the public '
                              f'face of {target} (PUBLIC in this file)')
    lines = {}
    for f in files:
        room = room_of(f)
        if room is not None and not room.startswith("tools/"):
            lines[room] = lines.get(room, 0) + len((root / f).read_text().splitlines())
    total = sum(lines.values())
    for room, n in sorted(lines.items(), key=lambda kv: -kv[1]):
        if n > MAX_ROOM_SHARE * total:
            errors.append(f"{room} holds {n} of the library's {total} lines "
                          f"({100 * n / total:.0f} % > {100 * MAX_ROOM_SHARE:.0f} %)")
    for room, headers in PUBLIC.items():
        errors += [f"PUBLIC lists {h} for {room}: no such file"
                   for h in headers if not (root / h).is_file()]
    for e in errors:
        print("layering:", e)
    if not files:
        print("layering: no sources found under", root)
        return 1
    largest = max(lines, key=lines.get)
    print(f"layering: {len(files)} files, {len(errors)} problems; largest room {largest}: "
          f"{100 * lines[largest] / total:.0f} % of {total} library lines")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
