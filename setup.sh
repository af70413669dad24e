#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine:
#   bash setup.sh run    install packages, build (Release), make the synthetic needle2
#                        model, inspect, verify, validate and run the trained reference model
#                        (text generation and a grammar-constrained tool call)
#   bash setup.sh test   install packages, build everything, run the whole test suite (ctest)
# Separate, longer commands: tests/sanitize.sh (ASan + UBSan build and subset),
# tests/fuzz/build_fuzzers.sh + run_fuzzers.sh (libFuzzer), cact-run bench (docs/benchmarks.md).
# Both are idempotent: packages already installed are not reinstalled; the build is reused.
# Package, configure and compiler output goes to build/setup.log (printed in part on failure).
set -euo pipefail
cd "$(dirname "$0")"

MODE="${1:-run}"
case "$MODE" in
  run | test) ;;
  *)
    echo "usage: bash setup.sh [run|test]" >&2
    exit 2
    ;;
esac
BUILD="${CACT_BUILD_DIR:-build}"
JOBS="$(nproc)"
# libopenblas0-pthread: libtorch's BLAS (without it Debian's libtorch runs on the reference BLAS).
PACKAGES=(build-essential cmake pkg-config libtorch-dev libabsl-dev libcli11-dev nlohmann-json3-dev
          libzstd-dev zstd libgtest-dev libopenblas0-pthread python3-torch python3-numpy
          python3-sentencepiece python3-jsonschema)
# apt, cmake and compiler output go to this log; the terminal gets one line per step.
mkdir -p "$BUILD"
LOG="$BUILD/setup.log"
: >"$LOG"

# step WHAT COMMAND...: runs COMMAND into the log; on failure prints the log's tail and stops.
step() {
  local what="$1"
  shift
  echo "== $what"
  echo "== $what: $*" >>"$LOG"
  if ! "$@" >>"$LOG" 2>&1; then
    echo "setup.sh: $what failed; full log: $LOG (last 30 lines below)" >&2
    tail -n 30 "$LOG" >&2
    exit 1
  fi
}

install_packages() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  step "installing ${missing[*]}" sh -c "$sudo apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends ${missing[*]}"
}

# CI builds with -Werror: a warning there is a failure, not noise.
configure() {
  local werror=OFF
  [ "${CI:-}" = true ] && werror=ON
  step "configuring $BUILD (Release, CACT_WERROR=$werror)" \
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCACT_WERROR="$werror" "$@"
}

case "$MODE" in
  run)
    install_packages
    configure
    step "building cact-inspect, cact-quant, cact-run" \
      cmake --build "$BUILD" -j"$JOBS" --target cact-inspect cact-quant cact-run
    mkdir -p out
    B="$BUILD/tools"
    step "cact-quant synth --geometry needle2 (synthetic model, released geometry)" \
      "$B/cact-quant" synth --geometry needle2 --seed 1 -o out/needle2.cact
    # The demos run the trained reference model (docs/training.md): random weights would
    # prove exactness, not quality.
    REF=docs/reference-model/reference.cact
    echo "== cact-inspect $REF (trained on Debian text: docs/training.md)"
    "$B/cact-inspect" "$REF"
    echo "== cact-inspect verify $REF"
    "$B/cact-inspect" verify "$REF"
    echo "== cact-run --validate (fast path vs FP32 reference)"
    "$B/cact-run" "$REF" --validate -p "Permission is hereby granted, free of charge, to any person obtaining a copy"
    echo "== cact-run generation (greedy)"
    "$B/cact-run" "$REF" -p "Permission is hereby granted, free of charge, to any person obtaining a copy of this software" -n 48
    # The base model was trained on licence text, not tool calls: the grammar makes its answer
    # a valid call list all the same (docs/tool-calls.md).
    echo "== cact-run tool call (grammar-constrained; --json for reasoning, confidence, timings)"
    "$B/cact-run" "$REF" --tools docs/reference-model/tools.json --query "What is the weather in Oslo?" -n 48
    # The tool-calling model copies values from the query: "Gorloquin" and "python3-linmarpel"
    # are held out of its training (docs/reference-model/tool-call-training.md).
    CALLS=docs/reference-model/toolcall.cact
    echo "== cact-run tool calls on $CALLS (values it never saw in training)"
    "$B/cact-run" "$CALLS" --tools docs/reference-model/tools.json --query "Is it windy in Gorloquin?"
    "$B/cact-run" "$CALLS" --tools docs/reference-model/tools.json --query "Do we have python3-linmarpel in Debian?"
    ;;
  test)
    install_packages
    configure
    step "building everything (the TorchScript bridge takes a few minutes)" \
      cmake --build "$BUILD" -j"$JOBS"
    step "ctest" ctest --test-dir "$BUILD" --output-on-failure -j"$JOBS" --timeout 900
    grep -E '^[0-9]+% tests passed' "$LOG"
    ;;
esac
