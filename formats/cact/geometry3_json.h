// The Needle 3 geometry as JSON, one key per header field in header order (the exporter's
// names; engram_orders and engram_sites with all 4 and 16 entries, as stored). cact-inspect
// prints it and compares two files field by field with it.
#pragma once
#include "formats/needle/geometry3.h"
#include "nlohmann/json.hpp"

namespace cact {

nlohmann::ordered_json Geometry3ToJson(const Geometry3& g);

}  // namespace cact
