#!/usr/bin/env python3
"""The rooms of docs/architecture.md and what each may include.

Every project include ("lib/...", "engine/kernels/...") in a room's sources must name a room
on that room's list; anything else is reported with the file, the line and the include, and
the check fails. Usage: layering.py [SOURCE_DIR]
"""
import pathlib
import re
import subprocess
import sys

# room -> the rooms its files may include. A file belongs to the longest room that
# prefixes its path; an include is judged by the longest room that prefixes it.
RULES = {
    "lib": ["lib"],
    "formats": ["formats", "lib"],
    "quant": ["quant", "formats", "lib"],
    "engine/kernels": ["engine/kernels", "lib"],
    "engine": ["engine", "engine/kernels", "quant", "formats", "lib"],
    "engine/torchscript": ["engine/torchscript", "quant", "formats", "lib"],
    "train": ["train", "engine", "quant", "formats", "lib"],
    "train/torch": ["train/torch", "train", "engine/torchscript", "engine", "quant", "formats",
                    "lib"],
    "tools/common": ["tools/common", "engine", "engine/kernels", "quant", "formats", "lib"],
    "tools/cact-inspect": ["tools/cact-inspect", "tools/common", "quant", "formats", "lib"],
    "tools/cact-quant": ["tools/cact-quant", "tools/common", "quant", "formats", "lib"],
    "tools/cact-run": ["tools/cact-run", "tools/common", "engine", "engine/kernels", "quant",
                       "formats", "lib"],
    "tools/cact-torch": ["tools/cact-torch", "tools/common", "train/torch", "train",
                         "engine/torchscript", "engine", "quant", "formats", "lib"],
}
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
    files = subprocess.run(["git", "ls-files", "lib", "formats", "quant", "engine", "train", "tools"],
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
    for e in errors:
        print("layering:", e)
    if not files:
        print("layering: no sources found under", root)
        return 1
    print(f"layering: {len(files)} files, {len(errors)} includes outside their room's rules")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
