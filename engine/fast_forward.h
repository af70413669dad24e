// The fast CPU forward path: the spec's forward pass computed straight from the packed
// weights with the int8 CQ kernels (engine/kernels), an int8 KV cache bounded by
// window + sink, and chunked prefill.
//
// Numerics (what differs from the FP32 reference, engine/reference_forward.cc):
//  - every CQ matrix product quantizes its input per group after the FWHT rotation and
//    maps the codebook to int8 (kernels/cq_kernels.h). By default the activation keeps a
//    second int8 level (the rounding residual, q1 + q2/128) and 3/4-bit codebooks keep
//    their int8 residual: plain int8 (the official engine's numerics) is ~1 % off the
//    reference in logits relative L2 on the fixtures, over the 0.5 % contract; the two
//    levels bring it to ~0.3 % for one more vpdpbusd per 64 codes;
//  - keys and values are stored as int8 with one absmax scale per vector (kv_cache.h);
//  - exp/sigmoid/SiLU use a ~1 ulp polynomial exp (kernels/fast_ops.h); Sinkhorn runs in
//    the exponential domain in double (the same iteration as the log-space one).
// Everything else (norms, RoPE, engram hashing and convolution, the Hadamard MLP, mHC
// mixing) is FP32 as in the reference. The results are bit-identical for every kernel ISA
// and thread count, and prefill gives the same bits as token-by-token decode except for
// the attention of tokens within one chunk (identical too: keys are stored before use).
#pragma once
#include <memory>

#include "engine/forward.h"

namespace cact {

// Prefill chunk: the most tokens processed together (matrix-matrix products). 16, not 64:
// the chunk's buffers were ~3.4 MB of a session's peak RSS at 64, and prefill is within a
// few percent (docs/benchmarks.md, "Start-up and memory").
inline constexpr uint32_t kFastPrefillChunk = 16;
// The chunk once a Feed of more tokens asks for every position's logits (perplexity):
// each 16-row weight panel is then unpacked once per 64 tokens instead of 16, ~6 % of
// such a prefill (docs/benchmarks.md, "Prefill with all-position logits"), for ~2 MB more.
inline constexpr uint32_t kFastLogitsChunk = 64;

struct FastForwardOptions {
  bool two_level_activations = true;    // false: plain int8 activations
  bool codebook_residual = true;        // int8 residual of 3- and 4-bit codebooks
  bool codebook_residual_2bit = false;  // also for 2-bit codebooks (more accurate, slower)
  // Copy the codes into 16-row tiles where the kernels read them (AVX-512: ~1.4x faster
  // products, same bits; ~10 MB that replace the file's codes in the resident set).
  bool code_tiles = true;
};

std::unique_ptr<Forward> MakeFastForward(const Model& model, const ForwardOptions& options,
                                         const FastForwardOptions& fast = {});

}  // namespace cact
