#!/usr/bin/env bash
# CTest (label quality): measure_quality.sh end to end on the small synthetic model, a few
# chunks only. Checks one table row per preset with a numeric PPL, not the values (the
# synthetic model is untrained).
#   measure_quality_test.sh BUILD/tools SOURCE_DIR
set -euo pipefail
bin="$1" src="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
text=/usr/share/common-licenses/Apache-2.0
[[ -r "$text" ]] || text="$src/README.md"

"$bin/cact-quant" synth --geometry small --seed 1 -q -o "$tmp/s.cact" >/dev/null
"$bin/cact-quant" dequant "$tmp/s.cact" -o "$tmp/s.safetensors" >/dev/null
bash "$src/tests/quality/measure_quality.sh" --bin "$bin" --weights "$tmp/s.safetensors" \
  --tokenizer "$src/quant/data/small_tokenizer.model" --text "$text" --ctx 64 --chunks 4 -t 2 \
  -o "$tmp/table.md" 2>"$tmp/progress.log"
cat "$tmp/table.md"

fail=0
mapfile -t presets < <("$bin/cact-quant" presets --json | jq -r '.[].name' 2>/dev/null ||
  /usr/bin/python3 -c 'import json,sys; [print(p["name"]) for p in json.load(sys.stdin)]' \
    < <("$bin/cact-quant" presets --json))
rows=$(grep -c '^| [a-z0-9]* | [0-9.]* | [0-9.]* | [0-9.]* ± [0-9.]* |' "$tmp/table.md" || true)
if [[ "$rows" != "${#presets[@]}" ]]; then
  echo "FAIL: $rows table rows with a numeric PPL, want ${#presets[@]}" >&2
  fail=1
fi
for p in "${presets[@]}"; do
  if ! grep -q "^| $p | [0-9.]* | [0-9.]* | [0-9.]* ± " "$tmp/table.md"; then
    echo "FAIL: no row with a numeric PPL for preset $p" >&2
    fail=1
  fi
done
exit "$fail"
