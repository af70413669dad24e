// Rows of a matrix record decoded on demand by the fast path (the embedding row of each
// token, the engram table rows): codebook value times the group's norm, rotated back with
// the SIMD FWHT. Internal to engine/fast_forward.cc.
#pragma once
#include <cstdint>

#include "engine/model.h"
#include "lib/file_bytes.h"

namespace cact::fast {

// Straight from the mapping (the embedding, when the tied logits read every code page
// anyway).
void DecodeRow(const MatrixView& v, uint32_t row, float* out);
// Through FileBytes::ReadOut (the engram tables, and the embedding when the logits read
// its tiles: a few random rows per token, which would otherwise keep ~2 MB of pages
// resident over a long session).
void ReadAndDecodeRow(const FileBytes& file, const MatrixView& v, uint32_t row, float* out);

}  // namespace cact::fast
