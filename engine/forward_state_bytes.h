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
#include "lib/byte_io.h"

namespace cact::state_bytes {

// u32 count, then the ids (int32).
void PutTokens(ByteWriter& w, std::span<const int32_t> tokens);
// count <= max_seq_len, every id in [0, vocab).
absl::Status GetTokens(ByteReader& r, const Model& model, std::vector<int32_t>* tokens);

// Exactly `n` finite floats (the reader knows n from the geometry and the position).
void PutFloats(ByteWriter& w, std::span<const float> v);
absl::Status GetFloats(ByteReader& r, std::string_view field, size_t n, std::vector<float>* v);

// u8 1 and the [T][L][d] lane means when recorded, else u8 0; the reader expects exactly
// what this forward records (`keep_hidden`) for `positions` tokens.
void PutHidden(ByteWriter& w, const HiddenRecord& hidden);
absl::Status GetHidden(ByteReader& r, bool keep_hidden, size_t positions, const Model& model,
                       HiddenRecord* hidden);

}  // namespace cact::state_bytes
