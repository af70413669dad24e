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
# Three tool calls over the reference tools: one call each, and an off-topic query.
/usr/bin/python3 - "$src/docs/reference-model/tools.json" "$tmp/calls.jsonl" <<'PY'
import json, sys
tools = json.load(open(sys.argv[1]))
rows = [("Is it raining in Oslo?", [{"name": "get_weather", "arguments": {"city": "Oslo"}}]),
        ("Set a timer for 5 minutes", [{"name": "set_timer", "arguments": {"minutes": 5}}]),
        ("Tell me a joke", [])]
with open(sys.argv[2], "w") as f:
    for q, a in rows:
        f.write(json.dumps({"query": q, "tools": tools, "answers": a}) + "\n")
PY
bash "$src/tests/quality/measure_quality.sh" --bin "$bin" --weights "$tmp/s.safetensors" \
  --tokenizer "$src/quant/data/small_tokenizer.model" --text "$text" --ctx 64 --chunks 4 -t 2 \
  --calls "$tmp/calls.jsonl" -o "$tmp/table.md" 2>"$tmp/progress.log"
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
# A tool-call cell: "12.5 % (1/8)"; every row ends with three of them.
cell='[0-9.]* % ([0-9]*/[0-9]*)'
for p in "${presets[@]}"; do
  if ! grep -q "^| $p | [0-9.]* | [0-9.]* | [0-9.]* ± .* | $cell | $cell | $cell |\$" "$tmp/table.md"; then
    echo "FAIL: no row with a numeric PPL and tool-call cells for preset $p" >&2
    fail=1
  fi
done
# The paths table: every path, and 3 examples each (valid: the grammar's answers).
for path in ref fast fast-int8; do
  if ! grep -q "^| $path | [0-9.]* ± [0-9.]* | $cell | 100.0 % (3/3) | $cell |\$" "$tmp/table.md"; then
    echo "FAIL: no paths row for $path with 3 valid tool calls" >&2
    fail=1
  fi
done
exit "$fail"
