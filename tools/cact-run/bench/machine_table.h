// Per-ISA loops behind machine.h.
#pragma once
#include <cstddef>
#include <cstdint>

namespace cact::kernels::internal {

// Reads [p, p + bytes) once; returns a value depending on every byte (defeats elision).
uint64_t ReadPassAvx512(const uint8_t* p, size_t bytes);
// `iters` iterations of 8 independent dot instructions; returns MACs done.
uint64_t DotLoopAvx512(uint64_t iters);
uint64_t DotLoopAvxVnni(uint64_t iters);
uint64_t DotLoopAvx2(uint64_t iters);

}  // namespace cact::kernels::internal
