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

command -v clang++ >/dev/null || { echo "build_torch_fuzzer: clang++ not found (apt-get install clang)" >&2; exit 1; }
if ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "build_torch_fuzzer: libFuzzer runtime missing (apt-get install libclang-rt-dev)" >&2
  exit 1
fi

cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$build" -j"$jobs"

# libtorch is not instrumented: keep ASan from tripping on its own allocation pairs.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} "$build/make_torch_seeds" "$root/../shared/fixtures" "$build/corpus/fuzz_torch_import"
echo "fuzz_torch_import built in $build; corpus in $build/corpus/fuzz_torch_import"
