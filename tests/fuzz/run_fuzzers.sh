#!/bin/sh
# Runs each libFuzzer target built by build_fuzzers.sh, one at a time, on a working copy of
# its seed corpus, for at most SECONDS seconds or RUNS executions (whichever ends first),
# and prints one summary line per target (executions, exec/s, coverage, crashes).
#   tests/fuzz/run_fuzzers.sh [-t SECONDS] [-n RUNS] [-b BUILD_DIR] [TARGET...]
# Crashing inputs are written to BUILD_DIR/artifacts/; logs to BUILD_DIR/logs/.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$root/build-fuzz
seconds=60
runs=-1
while getopts t:n:b: opt; do
  case $opt in
    t) seconds=$OPTARG ;;
    n) runs=$OPTARG ;;
    b) build=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
targets=${*:-"fuzz_cact_file fuzz_cact3_file fuzz_file_bytes fuzz_tokenizer_blob fuzz_tokenizer_encode fuzz_safetensors fuzz_scheme fuzz_finetune_jsonl fuzz_lora_adapter fuzz_engine_forward fuzz_quant_build fuzz_pickle fuzz_pickle_writer fuzz_training_pickle fuzz_corpus_manifest fuzz_geometry_spec fuzz_tool_catalog fuzz_prompt_cache"}
[ -d "$build/corpus" ] || { echo "run_fuzzers: run tests/fuzz/build_fuzzers.sh first" >&2; exit 1; }

# Largest input each target mutates (the small seed models are about 10 KB).
max_len() {
  case $1 in
    fuzz_cact_file|fuzz_cact3_file|fuzz_file_bytes|fuzz_engine_forward) echo 32768 ;;
    fuzz_safetensors|fuzz_lora_adapter|fuzz_quant_build|fuzz_pickle|fuzz_pickle_writer|fuzz_training_pickle) echo 65536 ;;
    fuzz_tokenizer_blob) echo 131072 ;;
    fuzz_finetune_jsonl|fuzz_tool_catalog) echo 16384 ;;
    fuzz_prompt_cache) echo 65536 ;;
    *) echo 4096 ;;
  esac
}

mkdir -p "$build/artifacts" "$build/logs" "$build/work"
export OMP_NUM_THREADS=1
status=0
for t in $targets; do
  bin=$build/$t
  [ -x "$bin" ] || { echo "$t: not built" >&2; status=1; continue; }
  work=$build/work/$t
  mkdir -p "$work"
  log=$build/logs/$t.log
  before=$(ls "$build/artifacts" | grep -c "^$t-" || true)
  set +e
  "$bin" -max_total_time="$seconds" -runs="$runs" -max_len="$(max_len "$t")" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" \
    "$work" "$build/corpus/$t" >"$log" 2>&1
  rc=$?
  set -e
  after=$(ls "$build/artifacts" | grep -c "^$t-" || true)
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1)
  corp=$(ls "$work" | wc -l)
  echo "$t: rc=$rc execs=${execs:-?} exec/s=${speed:-?} ${cov:-cov: ?} corpus=$corp new_crashes=$((after - before)) log=$log"
  [ "$rc" -eq 0 ] || status=1
done
exit $status
