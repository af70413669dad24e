#!/bin/sh
# Builds the libFuzzer targets (clang, ASan, UBSan, coverage) into BUILD_DIR (default
# <repo>/build-fuzz) and writes the seed corpora. No network: everything is a Debian package.
#   tests/fuzz/build_fuzzers.sh [BUILD_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build-fuzz}
jobs=${CACT_FUZZ_JOBS:-2}

. "$here/fuzz_build.sh"
fuzz_build build_fuzzers "$here" "$build" "$jobs"

# Seed corpora: the fixtures' models, their tokenizer blobs, weights, scheme strings, and
# the small models written by make_fuzz_seeds.
"$build/make_fuzz_seeds" "$build" >/dev/null
CACT_BUILD="$build" CACT_ROOT="$root" /usr/bin/python3 "$here/make_corpora.py"
echo "fuzzers built in $build; corpora in $build/corpus"
