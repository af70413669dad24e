#!/bin/sh
# Builds fuzz_torch_import (clang, ASan, UBSan, coverage on our code; Debian's libtorch
# uninstrumented) into BUILD_DIR (default <repo>/build-fuzz-torch) and writes its seed
# corpus to BUILD_DIR/corpus/fuzz_torch_import. Run it afterwards with run_torch_fuzzer.sh
# or by hand (see README.md).
#   tests/fuzz/torch/build_torch_fuzzer.sh [BUILD_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=${1:-$root/build-fuzz-torch}
jobs=${CACT_FUZZ_JOBS:-2}

. "$here/../fuzz_build.sh"
# libtorch-dev for find_package(Torch), zlib1g-dev for the zip-aware mutator.
# shellcheck disable=SC2086
fuzz_packages build_torch_fuzzer $FUZZ_COMMON_PACKAGES libtorch-dev zlib1g-dev
fuzz_build build_torch_fuzzer "$here" "$build" "$jobs"

# libtorch is not instrumented: keep ASan from tripping on its own allocation pairs.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} "$build/make_torch_seeds" "$root/../shared/fixtures" "$build/corpus/fuzz_torch_import"
echo "fuzz_torch_import built in $build; corpus in $build/corpus/fuzz_torch_import"
