// The pieces of a forward's saved state as bytes (Forward::StateBytes / StateFromBytes),
// shared by both paths. Little-endian, no padding; every reader checks sizes against the
// model and refuses values a forward could not have written.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "engine/forward.h"
#include "engine/probe_heads.h"
#include "lib/byte_io.h"

namespace cact::state_bytes {

// u32 count, then the ids (int32).
void PutTokens(ByteWriter& w, std::span<const int32_t> tokens);
// count <= max_seq_len, every id in [0, vocab).
absl::Status GetTokens(ByteReader& r, const Model& model, std::vector<int32_t>* tokens);

// Exactly `n` finite floats (the reader knows n from the geometry and the position).
void PutFloats(ByteWriter& w, std::span<const float> v);
absl::Status GetFloats(ByteReader& r, std::string_view field, size_t n, std::vector<float>* v);

// u8 1 and the [T][L][d] lane means when recorded (and `with_rows`), u8 2 when recorded but
// left out (the restored record starts at `positions`), else u8 0; the reader expects what
// this forward records (`keep_hidden`) for `positions` tokens.
void PutHidden(ByteWriter& w, const HiddenRecord& hidden, bool keep_hidden, bool with_rows);
absl::Status GetHidden(ByteReader& r, bool keep_hidden, size_t positions, const Model& model,
                       HiddenRecord* hidden);

// A pool of the probe heads (engine/probe_heads.h ProbeBlock): per head and probe its max,
// sum and d accumulated values. The reader checks the counts against the model and refuses
// NaN, +Inf, a negative sum, and a pool of nothing (max -Inf) that is not all zeros.
void PutProbeBlock(ByteWriter& w, const ProbeBlock& block);
absl::Status GetProbeBlock(ByteReader& r, const Model& model, ProbeBlock* block);

}  // namespace cact::state_bytes
