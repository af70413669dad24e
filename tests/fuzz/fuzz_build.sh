# Sourced by build_fuzzers.sh and torch/build_torch_fuzzer.sh (POSIX sh):
#   fuzz_packages NAME PACKAGE...   installs the Debian packages that are missing (apt-get,
#                                   as root or through sudo), or names them and stops
#   fuzz_build NAME SOURCE_DIR BUILD_DIR JOBS
# checks for clang and the libFuzzer runtime, then configures the standalone clang project
# SOURCE_DIR into BUILD_DIR and builds it.

# What every fuzz project needs (tests/fuzz/fuzz_common.cmake): clang 14 with its libFuzzer
# runtime and OpenMP, cmake + make, the libraries find_package() asks for, and python3 with
# numpy for the seed corpora (make_corpora.py pickles numpy arrays).
# shellcheck disable=SC2034  # used by the scripts that source this file
FUZZ_COMMON_PACKAGES="build-essential cmake clang libclang-rt-14-dev libomp-14-dev libabsl-dev
  nlohmann-json3-dev libzstd-dev python3 python3-numpy"

fuzz_packages() {
  name=$1
  shift
  missing=""
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing="$missing $p"
  done
  [ -n "$missing" ] || return 0
  if [ "$(id -u)" -eq 0 ]; then
    sudo=""
  elif command -v sudo >/dev/null; then
    sudo="sudo"
  else
    echo "$name: missing Debian packages:$missing (install them as root: apt-get install$missing)" >&2
    exit 1
  fi
  echo "$name: installing$missing"
  # shellcheck disable=SC2086
  if ! { $sudo apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing; }; then
    echo "$name: could not install$missing (apt-get install$missing)" >&2
    exit 1
  fi
}

fuzz_build() {
  command -v clang++ >/dev/null || { echo "$1: clang++ not found (apt-get install clang)" >&2; exit 1; }
  if ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
    echo "$1: libFuzzer runtime missing (apt-get install libclang-rt-14-dev)" >&2
    exit 1
  fi
  cmake -S "$2" -B "$3" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
  cmake --build "$3" -j"$4"
}
