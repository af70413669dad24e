#!/bin/sh
# Runs fuzz_torch_import (built by build_torch_fuzzer.sh) on a working copy of its seed
# corpus for SECONDS seconds (default 1800), niced, and prints one summary line (executions,
# exec/s, coverage, crashes). libFuzzer's fork mode with one job (one fuzzing process at a
# time) keeps going after a crash, an out-of-memory or a timeout, so one libtorch finding
# does not end the campaign. Crashing inputs go to BUILD_DIR/artifacts/, the log to
# BUILD_DIR/logs/fuzz_torch_import.log.
#   tests/fuzz/torch/run_torch_fuzzer.sh [-t SECONDS] [-b BUILD_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=$root/build-fuzz-torch
seconds=1800
while getopts t:b: opt; do
  case $opt in
    t) seconds=$OPTARG ;;
    b) build=$OPTARG ;;
    *) exit 2 ;;
  esac
done
t=fuzz_torch_import
[ -d "$build/corpus/$t" ] || { echo "run_torch_fuzzer: run tests/fuzz/torch/build_torch_fuzzer.sh first" >&2; exit 1; }
mkdir -p "$build/artifacts" "$build/logs" "$build/work/$t"
log=$build/logs/$t.log
before=$(ls "$build/artifacts" | grep -c "^$t-" || true)
# The tiny/odd exports are about 2.3 MB; max_len must hold them whole.
export OMP_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
set +e
nice -n 5 "$build/$t" -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
  -max_total_time="$seconds" -max_len=3000000 -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" "$build/work/$t" "$build/corpus/$t" >"$log" 2>&1
rc=$?
set -e
after=$(ls "$build/artifacts" | grep -c "^$t-" || true)
# Fork-mode status lines: "#EXECS: cov: N ft: N corp: N exec/s N oom/timeout/crash: a/b/c time: Ns".
last=$(grep '^#[0-9]*: cov:' "$log" | tail -1)
execs=$(echo "$last" | sed -n 's/^#\([0-9]*\):.*/\1/p')
secs=$(echo "$last" | sed -n 's/.* time: \([0-9]*\)s.*/\1/p')
speed=$([ -n "$execs" ] && [ "${secs:-0}" -gt 0 ] && echo $((execs / secs)) || true)  # average over the run
cov=$(echo "$last" | grep -o 'cov: [0-9]* ft: [0-9]*')
fails=$(echo "$last" | grep -o 'oom/timeout/crash: [0-9/]*')
echo "$t: rc=$rc execs=${execs:-?} exec/s=${speed:-?} ${cov:-cov: ?} ${fails:-} corpus=$(ls "$build/work/$t" | wc -l) new_artifacts=$((after - before)) log=$log"
exit $rc
