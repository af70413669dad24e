#!/bin/sh
# Builds the libFuzzer targets (clang, ASan, UBSan, coverage) into BUILD_DIR (default
# <repo>/build-fuzz) and writes the seed corpora. Missing Debian packages are installed first
# (apt-get, as root or through sudo); nothing else comes from the network.
#   tests/fuzz/build_fuzzers.sh [BUILD_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build-fuzz}
jobs=${CACT_FUZZ_JOBS:-2}

. "$here/fuzz_build.sh"
# libsentencepiece-dev: the tokenizer encoder's differential oracle (tests/fuzz/CMakeLists.txt).
# shellcheck disable=SC2086
fuzz_packages build_fuzzers $FUZZ_COMMON_PACKAGES libsentencepiece-dev
fuzz_build build_fuzzers "$here" "$build" "$jobs"

# Seed corpora: the fixtures' models, their tokenizer blobs, weights, scheme strings, and
# the small models written by make_fuzz_seeds; the Needle 3 seeds fuzz_cact3_file writes.
"$build/make_fuzz_seeds" "$build" >/dev/null
CACT_BUILD="$build" CACT_ROOT="$root" /usr/bin/python3 "$here/make_corpora.py"
mkdir -p "$build/corpus/fuzz_prompt_cache" "$build/corpus/fuzz_cact3_file"
CACT_FUZZ_WRITE_SEEDS="$build/corpus/fuzz_prompt_cache" "$build/fuzz_prompt_cache"
CACT_FUZZ_WRITE_SEEDS="$build/corpus/fuzz_cact3_file" "$build/fuzz_cact3_file"
echo "fuzzers built in $build; corpora in $build/corpus"
