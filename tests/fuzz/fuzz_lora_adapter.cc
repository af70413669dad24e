// LoRA adapter loading over arbitrary input: [flags u8][config length u16 LE][adapter config
// JSON][adapter safetensors]. The adapter is parsed against the tiny fixture's geometry; an
// accepted one has its deltas computed and is merged into the tiny fixture (really, with
// requantization, when flags bit 1 is set and it touches at most two projections; otherwise
// as a dry run). Flags bit 0 passes a --scale override instead of the config.
#include <cstdint>
#include <optional>
#include <string>

#include "formats/cact/cact_file.h"
#include "formats/safetensors.h"
#include "fuzz_common.h"
#include "quant/import/lora.h"

using namespace cact;

namespace {
const CactFile* g_base = nullptr;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::SingleThreaded();
  static auto base = CactFile::Open(std::string(CACT_FIXTURES_DIR) + "/tiny/model.cact");
  if (!base.ok()) std::abort();
  g_base = &*base;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const uint8_t flags = data[0];
  const size_t config_len = std::min<size_t>(data[1] | (data[2] << 8), size - 3);
  const std::string config(reinterpret_cast<const char*>(data + 3), config_len);
  auto st =
      ParseSafetensors({data + 3 + config_len, size - 3 - config_len}, "fuzz-adapter.safetensors");
  if (!st.ok()) return 0;
  const std::optional<double> scale = (flags & 1) ? std::optional<double>(0.5) : std::nullopt;
  auto ad = ParseLoraAdapter(*st, "fuzz-adapter.safetensors", config, scale, g_base->geometry());
  if (!ad.ok()) {
    CACT_FUZZ_CHECK(ad.status().message().find("fuzz-adapter.safetensors") != std::string::npos,
                    "error names the adapter");
    return 0;
  }
  for (const LoraPair& p : ad->pairs) {
    CACT_FUZZ_CHECK(p.a.size() == size_t(p.rank) * p.in && p.b.size() == size_t(p.out) * p.rank,
                    "pair sizes match rank x in and out x rank");
    CACT_FUZZ_CHECK(LoraDelta(p, ad->scale).size() == size_t(p.out) * p.in, "delta size");
  }
  LoraRequest req;
  req.base = g_base;
  req.adapter = &*ad;
  req.dry_run = !((flags & 2) && ad->pairs.size() <= 2);
  RebuildReport report;
  auto merged = MergeLora(req, &report);
  if (merged.ok() && !req.dry_run) {
    auto bytes = SerializeCact(*merged, "fuzz-merged.cact");
    CACT_FUZZ_CHECK(bytes.ok(), "a merged model serializes and validates");
  }
  return 0;
}
