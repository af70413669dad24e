#!/bin/sh
# AddressSanitizer + UBSan build of the unit tests (no libtorch) and a quick ctest subset:
# the lib, formats, quant, kernels, cli and reliability areas in full (the reliability
# sweeps are the point: every truncation and bit flip of the fixtures with ASan watching the
# reads; the cli tests run the sanitized tools), plus the engine tests that are quick under
# ASan. Build dir: <repo>/build-asan. CI runs it after `setup.sh test` (.ci/run).
#   tests/sanitize.sh [-j JOBS]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${CACT_ASAN_BUILD:-$root/build-asan}
jobs=2
[ "${1:-}" = "-j" ] && jobs=$2

# -O1 -g1 (line tables and functions, no variable locations): the reports keep every
# frame's function and file:line, and the build takes about a third less CPU than -O2 -g
# while the subset runs 3.5% longer; the test files of the areas that only drive the
# sanitized tools and parsers (lib, formats, cli, reliability) at -O0 (docs/reliability.md,
# "CI time").
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCACT_SANITIZE=ON \
  -DCACT_WITH_TORCH=OFF -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCACT_TEST_COMPILE_OPTIONS=-O0 >/dev/null

# The unit test executables (they depend on the tools the CLI-level tests run).
targets="cact_lib_tests cact_formats_tests cact_quant_tests cact_kernels_tests cact_engine_tests
         cact_cli_tests cact_reliability_tests cact_train_tests"
echo "== building (ASan + UBSan)"
cmake --build "$build" -j"$jobs" --target $targets

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
# Engine tests: the fixture forward passes only (the synthetic needle2 ones are minutes
# under ASan) and the tool-call grammar in full, but not the 1,000-answer decoding sweep
# (the same code as its quicker tests, over many model runs); everything in the other areas.
echo "== ctest (sanitized subset)"
ctest --test-dir "$build" --output-on-failure -j"$jobs" --timeout 600 \
  -L '^(lib|formats|quant|kernels|cli|reliability|engine|train)$' \
  -E "${CACT_ASAN_EXCLUDE:-[Nn]eedle2|Synthetic.*Large|Benchmark|Speed|ThousandSeeds}"
