// The --geometry parser of cact-torch train over arbitrary text. An accepted spec is a
// geometry the .cact header validation accepts and the canonical layout can be built for.
#include <cstdint>
#include <string>

#include "formats/cact/header.h"
#include "formats/needle/tensor_table.h"
#include "fuzz_common.h"
#include "train/geometry_spec.h"

using namespace cact;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 256) return 0;  // a spec is a short flag value
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto g = train::ParseGeometrySpec(text);
  if (!g.ok()) {
    CACT_FUZZ_CHECK(!g.status().message().empty(), "error has a message");
    return 0;
  }
  Header h;
  h.geometry = *g;
  CACT_FUZZ_CHECK(ValidateHeader(h, "fuzz").ok(), "accepted geometry is a valid header");
  CACT_FUZZ_CHECK(g->engram_sub_dim * g->num_engram_tables == g->d_model, "sub = d / tables");
  // the layout is sized from the geometry: keep the fuzzer's memory bounded
  if (uint64_t(g->vocab) * g->d_model < (uint64_t{1} << 24) && g->num_layers < 64)
    CACT_FUZZ_CHECK(!CanonicalLayout(*g, {}).empty(), "layout");
  return 0;
}
