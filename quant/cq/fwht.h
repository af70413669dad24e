// Fast Walsh-Hadamard transform (Sylvester order), in place, float32.
#pragma once
#include <cstddef>

namespace cact {

// Unnormalised butterflies: x <- H_n x with H_n entries +-1. n must be a power of two.
void FwhtUnnormalized(float* x, size_t n);
// Orthonormal: x <- (H_n / sqrt(n)) x, i.e. the butterflies then one multiply by
// HadamardScale(n) (the entry of the official float32 dense matrix).
void FwhtOrthonormal(float* x, size_t n);
// float32(1) / float32(sqrt(n)): the magnitude of every entry of the orthonormal matrix.
float HadamardScale(size_t n);

}  // namespace cact
