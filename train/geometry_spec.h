// Geometries for training from scratch, named and overridable from the command line:
//   "reference"                  the committed reference model (docs/training.md)
//   "tiny"                       a few-second model for tests
//   "reference,layers=8,d=384"   a named one with fields changed
// Keys: vocab, d (d_model, also hada_n = next power of two), layers, heads, kv_heads,
// head_dim, seq (max_seq_len), window (kv_window), slots (engram_slots), sites (engram
// layers, '+'-separated, e.g. sites=1+4), lanes (mhc_lanes). engram_sub_dim is d / tables.
#pragma once
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/cact/header.h"

namespace cact::train {

absl::StatusOr<Geometry> ParseGeometrySpec(const std::string& spec);
std::vector<std::string> GeometryNames();
// One line per named geometry, for --help.
std::string DescribeGeometries();

}  // namespace cact::train
