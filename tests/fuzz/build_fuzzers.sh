#!/bin/sh
# Builds the libFuzzer targets (clang, ASan, UBSan, coverage) into BUILD_DIR (default
# <repo>/build-fuzz) and writes the seed corpora. No network: everything is a Debian package.
#   tests/fuzz/build_fuzzers.sh [BUILD_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build-fuzz}
jobs=${CACT_FUZZ_JOBS:-2}

command -v clang++ >/dev/null || { echo "build_fuzzers: clang++ not found (apt-get install clang)" >&2; exit 1; }
if ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "build_fuzzers: libFuzzer runtime missing (apt-get install libclang-rt-dev)" >&2
  exit 1
fi

cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$build" -j"$jobs"

# Seed corpora: the fixtures' models, their tokenizer blobs, weights, scheme strings, and
# the small models written by make_fuzz_seeds.
"$build/make_fuzz_seeds" "$build" >/dev/null
CACT_BUILD="$build" CACT_ROOT="$root" /usr/bin/python3 "$here/make_corpora.py"
echo "fuzzers built in $build; corpora in $build/corpus"
