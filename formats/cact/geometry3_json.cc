#include "formats/cact/geometry3_json.h"

namespace cact {

nlohmann::ordered_json Geometry3ToJson(const Geometry3& g) {
  nlohmann::ordered_json j;
  ForEachGeometry3Field(g, [&](const char* name, const auto& value) { j[name] = value; });
  return j;
}

}  // namespace cact
