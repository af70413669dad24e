// The geometry as JSON, one key per header field (spec names, arrays with all 4 entries);
// shared by cact-inspect, the diff and the TorchScript bridge's carried metadata.
#pragma once
#include "absl/status/statusor.h"
#include "formats/cact/header.h"
#include "nlohmann/json.hpp"

namespace cact {

nlohmann::ordered_json GeometryToJson(const Geometry& g);
// Every key is required; a missing or mistyped one is an error naming it.
absl::StatusOr<Geometry> GeometryFromJson(const nlohmann::json& j);

}  // namespace cact
