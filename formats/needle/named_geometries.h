// The Needle geometries that have a name, each written once: the released one and the
// smaller ones that synthetic models, training from scratch and the robustness tests build.
// Every field a geometry does not set keeps the released value (Geometry's and Geometry3's
// defaults).
#pragma once
#include <optional>
#include <string_view>
#include <vector>

#include "formats/needle/geometry.h"
#include "formats/needle/geometry3.h"

namespace cact {

// "needle2": the released geometry (spec table: vocab 8192, d 512, 27 layers).
Geometry Needle2Geometry();
// "small": the synthetic test model (vocab 512, d 128, 4 layers, engram sites 1 and 3).
Geometry SmallGeometry();
// "reference": the committed model trained from scratch (vocab 512, d 256, 4 layers).
Geometry ReferenceGeometry();
// "tiny": a reference model that trains in seconds (d 128, 2 layers, one engram site).
Geometry TinyGeometry();
// "micro": the smallest valid model (vocab 32, d 16, 2 layers, 2 mHC lanes), for robustness
// tests and fuzz seeds.
Geometry MicroGeometry();

struct NamedGeometry {
  std::string_view name;
  Geometry (*make)();
};

// All of the above, in the order listed.
const std::vector<NamedGeometry>& NamedGeometries();
// The geometry called `name`, or nullopt.
std::optional<Geometry> FindNamedGeometry(std::string_view name);

// Needle 3, read but not built here (so not in NamedGeometries, which `cact-quant synth`
// offers): the shipped needle3.cact's geometry (vocab 8192, d 768, 20 layers, q/k 48, v 64).
Geometry3 Needle3Geometry();
// A few layers of everything, for the generation-3 tests: QKV taps, a global layer, two
// engram sites, out_vocab 48 < vocab 64, q/k 16 != v 8.
Geometry3 SmallGeometry3();
// The smallest of them (vocab 32, d 32, 2 layers, one engram site), for fuzz seeds.
Geometry3 MicroGeometry3();

}  // namespace cact
