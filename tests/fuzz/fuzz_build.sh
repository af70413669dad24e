# Sourced by build_fuzzers.sh and torch/build_torch_fuzzer.sh (POSIX sh):
#   fuzz_build NAME SOURCE_DIR BUILD_DIR JOBS
# checks for clang and the libFuzzer runtime (Debian packages, no network), then configures
# the standalone clang project SOURCE_DIR into BUILD_DIR and builds it.
fuzz_build() {
  command -v clang++ >/dev/null || { echo "$1: clang++ not found (apt-get install clang)" >&2; exit 1; }
  if ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
    echo "$1: libFuzzer runtime missing (apt-get install libclang-rt-dev)" >&2
    exit 1
  fi
  cmake -S "$2" -B "$3" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
  cmake --build "$3" -j"$4"
}
