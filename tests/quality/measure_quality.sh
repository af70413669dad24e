#!/usr/bin/env bash
# measure_quality.sh: the size / quality table of the named schemes (cact-quant presets),
# like llama-quantize's list, for docs/quality.md. Not run in CI on a trained model: it
# needs FP32 weights and a held-out text, and takes minutes per preset on needle2.
#
#   measure_quality.sh --weights W.safetensors --tokenizer TOK.model --text HELDOUT.txt
#       [--weights-qat W2.safetensors] [--fp32-ppl X] [--calls CALLS.jsonl] [--bin BUILD/tools]
#       [--ctx N] [-t N] [--chunks N] [--workdir DIR] [-o quality_table.md]
#
# For every preset P: cact-quant build --preset P, its size; cact-run perplexity (PPL and
# its error); cact-run compare against the cq4 file (KL divergence, top-1 agreement).
# ΔPPL is against --fp32-ppl when given, else against cq4. --weights-qat adds a second
# block for quantization-aware-trained weights (compared with their own cq4 file).
# --calls adds tool-call columns (cact-run eval: exact calls, valid, refusals right) and a
# table of the three forward paths (ref, fast, fast-int8) on the needle preset.
# --chunks N scores only the first N chunks (quick runs); --workdir keeps the .cact files.
# The markdown table goes to stdout (or -o FILE); progress goes to stderr.
set -euo pipefail

usage() { sed -n '2,15s/^# \{0,1\}//p' "$0" >&2; exit 2; }
die() { echo "measure_quality.sh: $*" >&2; exit 2; }
log() { echo "[quality] $*" >&2; }

weights="" tokenizer="" text="" weights_qat="" fp32_ppl="" out="" workdir="" calls=""
bin="$(cd "$(dirname "$0")/../.." && pwd)/build/tools"
score_args=() eval_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --weights) weights="$2"; shift 2 ;;
    --tokenizer) tokenizer="$2"; shift 2 ;;
    --text) text="$2"; shift 2 ;;
    --weights-qat) weights_qat="$2"; shift 2 ;;
    --fp32-ppl) fp32_ppl="$2"; shift 2 ;;
    --calls) calls="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --ctx) score_args+=(--ctx "$2"); shift 2 ;;
    -t|--threads) score_args+=(-t "$2"); eval_args+=(-t "$2"); shift 2 ;;
    --chunks) score_args+=(--chunks "$2"); shift 2 ;;
    --workdir) workdir="$2"; shift 2 ;;
    -o|--output) out="$2"; shift 2 ;;
    -h|--help) usage ;;
    *) die "unknown argument '$1' (--help for usage)" ;;
  esac
done
[[ -n "$weights" && -n "$tokenizer" && -n "$text" ]] || usage
for f in "$weights" "$tokenizer" "$text" ${weights_qat:+"$weights_qat"} ${calls:+"$calls"}; do
  [[ -r "$f" ]] || die "$f: cannot read"
done
quant="$bin/cact-quant" run="$bin/cact-run"
[[ -x "$quant" && -x "$run" ]] || die "no cact-quant / cact-run in $bin (--bin BUILD/tools)"

if [[ -z "$workdir" ]]; then
  workdir="$(mktemp -d)"
  trap 'rm -rf "$workdir"' EXIT
fi
mkdir -p "$workdir"

# json FILE KEY: one top-level value of a JSON file (jq when installed).
json() {
  if command -v jq >/dev/null; then
    jq -r ".$2" "$1"
  else
    /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
  fi
}
# calc EXPR: floating point arithmetic and formatting (awk: no bc needed).
calc() { awk "BEGIN { print $1 }"; }

"$quant" presets --json >"$workdir/presets.json"
if command -v jq >/dev/null; then
  mapfile -t presets < <(jq -r '.[].name' "$workdir/presets.json")
else
  mapfile -t presets < <(/usr/bin/python3 -c \
    'import json,sys; [print(p["name"]) for p in json.load(open(sys.argv[1]))]' "$workdir/presets.json")
fi
ref=cq4

# call_cells MODEL.cact OUT.json [eval args]: " exact | valid | refusals right |" of the
# tool calls in --calls (percent, hits/total), nothing without --calls.
call_cells() {
  [[ -n "$calls" ]] || return 0
  local model="$1" json_out="$2"
  shift 2
  "$run" eval "$model" -f "$calls" --json -q "${eval_args[@]}" "$@" >"$json_out"
  /usr/bin/python3 - "$json_out" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["models"][0]["totals"]
cell = lambda k: "%.1f %% (%d/%d)" % (100 * t[k]["rate"], t[k]["hits"], t[k]["total"])
print(" %s | %s | %s |" % (cell("exact"), cell("valid"), cell("refusals_right")), end="")
PY
}
call_head=""
call_rule=""
if [[ -n "$calls" ]]; then
  call_head=" exact calls | valid | refusals right |"
  call_rule="---:|---:|---:|"
fi

# block LABEL WEIGHTS: builds and scores every preset, prints one markdown table.
block() {
  local label="$1" w="$2" dir="$workdir/$1"
  mkdir -p "$dir"
  local delta_head="ΔPPL vs $ref"
  [[ -n "$fp32_ppl" ]] && delta_head="ΔPPL vs FP32 ($fp32_ppl)"
  echo "| preset | size (MB) | bits/weight | PPL ± err | $delta_head | KLD mean vs $ref | top-1 vs $ref |$call_head"
  echo "|---|---:|---:|---:|---:|---:|---:|$call_rule"
  local p ref_ppl="" order=("$ref")  # cq4 first: the others are compared with it
  for p in "${presets[@]}"; do [[ "$p" == "$ref" ]] || order+=("$p"); done
  for p in "${order[@]}"; do
    log "$label: build $p"
    "$quant" build -q --json --weights "$w" --tokenizer "$tokenizer" --preset "$p" \
      -o "$dir/$p.cact" >"$dir/$p.build.json"
    log "$label: perplexity $p"
    "$run" perplexity "$dir/$p.cact" -f "$text" --json -q "${score_args[@]}" >"$dir/$p.ppl.json"
    local bytes ppl err bpw kld top1 delta
    bytes=$(stat -c %s "$dir/$p.cact")
    bpw=$(json "$dir/$p.build.json" payload_bpw)
    ppl=$(json "$dir/$p.ppl.json" ppl)
    err=$(json "$dir/$p.ppl.json" ppl_error)
    [[ "$p" == "$ref" ]] && ref_ppl="$ppl"
    if [[ "$p" == "$ref" ]]; then
      kld="ref" top1="ref"
    else
      log "$label: compare $ref $p"
      "$run" compare "$dir/$ref.cact" "$dir/$p.cact" -f "$text" --json -q "${score_args[@]}" \
        >"$dir/$p.compare.json"
      kld=$(calc "sprintf(\"%.5f\", $(json "$dir/$p.compare.json" kld_mean))")
      top1=$(calc "sprintf(\"%.2f%%\", 100 * $(json "$dir/$p.compare.json" top1_agreement))")
    fi
    delta=$(calc "sprintf(\"%+.4f\", $ppl - ${fp32_ppl:-$ref_ppl})")
    local cells=""
    if [[ -n "$calls" ]]; then
      log "$label: tool calls $p"
      cells=$(call_cells "$dir/$p.cact" "$dir/$p.eval.json")
    fi
    printf '| %s | %s | %s | %s ± %s | %s | %s | %s |%s\n' "$p" \
      "$(calc "sprintf(\"%.2f\", $bytes / 1e6)")" "$(calc "sprintf(\"%.4f\", $bpw)")" \
      "$(calc "sprintf(\"%.4f\", $ppl)")" "$(calc "sprintf(\"%.4f\", $err)")" \
      "$delta" "$kld" "$top1" "$cells"
  done
}

# paths LABEL: the needle preset of block LABEL on each forward path (with --calls).
paths() {
  local dir="$workdir/$1" path
  echo "| path | PPL ± err |$call_head"
  echo "|---|---:|$call_rule"
  for path in ref fast fast-int8; do
    log "$1: needle on $path"
    "$run" perplexity "$dir/needle.cact" -f "$text" --json -q --path "$path" "${score_args[@]}" \
      >"$dir/needle.$path.ppl.json"
    printf '| %s | %s ± %s |%s\n' "$path" \
      "$(calc "sprintf(\"%.4f\", $(json "$dir/needle.$path.ppl.json" ppl))")" \
      "$(calc "sprintf(\"%.4f\", $(json "$dir/needle.$path.ppl.json" ppl_error))")" \
      "$(call_cells "$dir/needle.cact" "$dir/needle.$path.eval.json" --path "$path")"
  done
}

{
  echo "Weights: $(basename "$weights"); text: $(basename "$text")"
  echo
  block fp32 "$weights"
  if [[ -n "$weights_qat" ]]; then
    echo
    echo "QAT weights: $(basename "$weights_qat")"
    echo
    block qat "$weights_qat"
  fi
  if [[ -n "$calls" ]]; then
    echo
    echo "The needle preset ($([[ -n "$weights_qat" ]] && echo "QAT weights" || echo "weights")) on each path:"
    echo
    paths "$([[ -n "$weights_qat" ]] && echo qat || echo fp32)"
  fi
} >"$workdir/table.md"
# Only a finished table reaches -o: a failed run leaves no half table behind.
if [[ -n "$out" ]]; then cp "$workdir/table.md" "$out"; else cat "$workdir/table.md"; fi
log "done"
