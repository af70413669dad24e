#include "formats/needle/geometry.h"

namespace cact {

const char* BlockStageName(BlockStage s) {
  switch (s) {
    case BlockStage::kPreMix: return "pre-mix";
    case BlockStage::kEngram: return "engram";
    case BlockStage::kAttention: return "attention";
    case BlockStage::kHadamardMlp: return "hadamard-mlp";
    case BlockStage::kPostMix: return "post-mix";
  }
  return "?";
}

int Geometry::EngramSiteAt(uint32_t layer) const {
  for (uint32_t s = 0; s < num_engram_sites && s < engram_sites.size(); ++s)
    if (engram_sites[s] == layer) return int(s);
  return -1;
}

}  // namespace cact
