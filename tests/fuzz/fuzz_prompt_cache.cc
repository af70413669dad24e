// The prompt cache file (engine/generate/prompt_cache.h) and the forward states inside it,
// on a micro model (tests/reliability/micro_model.h, with a confidence head). The first byte
// picks a forward (reference or fast, with or without hidden states and a window); the rest
// is a cache file, whose checksum is set right so mutations reach the structure behind it,
// or, without the magic, one state's bytes (or, with the selector's high bit, a pool of the
// probe heads as PrefixReuse keeps it). A file or state is refused with an error or
// accepted; an accepted state restores and continues by a token; nothing crashes.
//   CACT_FUZZ_WRITE_SEEDS=DIR fuzz_prompt_cache   writes valid cache files as seeds, exits
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "engine/forward_paths.h"
#include "engine/forward_state_bytes.h"
#include "engine/probe_heads.h"
#include "engine/generate/prompt_cache.h"
#include "engine/model.h"
#include "formats/cact/writer.h"
#include "fuzz_common.h"
#include "lib/atomic_file.h"
#include "lib/sha256.h"
#include "reliability/micro_model.h"

using namespace cact;

namespace {

struct World {
  std::unique_ptr<Model> model;
  std::vector<std::unique_ptr<Forward>> forwards;
};

World* MakeWorld() {
  auto* w = new World;
  reliability::MicroOptions o;
  o.heads = {{ProbeHead::kConfidence, 2, 1}};
  auto bytes = SerializeCact(reliability::MicroContents(reliability::MicroGeometry(), o));
  CACT_FUZZ_CHECK(bytes.ok(), "micro model serializes");
  auto file = CactFile::FromBytes(FileBytes::FromBuffer("micro.cact", std::move(*bytes)));
  CACT_FUZZ_CHECK(file.ok(), "micro model opens");
  auto model = Model::FromFile(std::move(*file));
  CACT_FUZZ_CHECK(model.ok(), "micro model loads");
  w->model = std::move(*model);
  for (const char* path : {"ref", "fast"}) {
    for (int variant = 0; variant < 2; ++variant) {
      ForwardOptions opt;
      opt.keep_hidden = variant == 0;
      if (variant == 1) opt.attn = {4, 2};
      auto f = MakeForwardPath(*w->model, path, opt);
      CACT_FUZZ_CHECK(f.ok(), "micro model forward");
      w->forwards.push_back(std::move(*f));
    }
  }
  return w;
}

World& TheWorld() {
  static World* w = MakeWorld();
  return *w;
}

void WriteSeeds(const std::string& dir) {
  World& w = TheWorld();
  const std::vector<int32_t> prefix = {1, 5, 9, 2, 7, 3, 11};
  for (size_t i = 0; i < w.forwards.size(); ++i) {
    Forward& f = *w.forwards[i];
    f.Reset();
    CACT_FUZZ_CHECK(f.Feed(prefix, nullptr, false).ok(), "seed prefix feeds");
    auto state = f.StateBytes(*f.Save());
    CACT_FUZZ_CHECK(state.ok(), "seed state serializes");
    PromptCacheKey key{.model_sha256 = std::string(64, 'a'), .path = f.name()};
    std::list<PromptCache::Entry> entries = {{prefix, *state}};
    std::string file = std::string(1, char(i)) + PromptCache::Serialize(key, "fuzz", entries);
    std::string raw = std::string(1, char(i)) + *state;
    if (i == 0) {
      auto pool = PoolProbeBlock(*w.model, prefix, f.hidden_by_position(), 0,
                                 HiddenLayout::kByPosition);
      CACT_FUZZ_CHECK(pool.ok(), "seed pool");
      ByteWriter pw;
      state_bytes::PutProbeBlock(pw, *pool);
      const std::string pool_seed = std::string(1, char(0x80)) + pw.bytes();
      CACT_FUZZ_CHECK(WriteFileAtomic(dir + "/pool_0",
                                      std::span<const uint8_t>(
                                          reinterpret_cast<const uint8_t*>(pool_seed.data()),
                                          pool_seed.size()),
                                      0)
                          .ok(),
                      "seed written");
    }
    for (const auto& [name, data] : {std::pair{"cache_", file}, std::pair{"state_", raw}}) {
      const std::string path = dir + "/" + name + std::to_string(i);
      CACT_FUZZ_CHECK(
          WriteFileAtomic(
              path,
              std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()),
              0)
              .ok(),
          "seed written");
    }
  }
}

// A prompt cache entry as PrefixReuse writes it for a model with probe heads: the heads' pool
// of the prefix, then the state.
void TryPool(std::string_view bytes) {
  ByteReader r(bytes, "fuzz.pool");
  ProbeBlock pool;
  if (!state_bytes::GetProbeBlock(r, *TheWorld().model, &pool).ok()) return;
  ProbeBlock rest = pool;
  const ProbeBlock blocks[2] = {pool, rest};
  auto out = FinishProbeBlocks(*TheWorld().model, blocks);
  if (out.ok() && out->has_confidence)
    CACT_FUZZ_CHECK(std::isfinite(out->confidence), "an accepted pool gives a finite confidence");
}

void TryState(Forward& f, std::string_view bytes) {
  auto state = f.StateFromBytes(bytes, "fuzz.state");
  if (!state.ok()) {
    CACT_FUZZ_CHECK(state.status().code() == absl::StatusCode::kDataLoss,
                    "state errors are DataLoss");
    return;
  }
  CACT_FUZZ_CHECK(f.Restore(**state).ok(), "an accepted state restores");
  // Re-serializing gives the same bytes back: nothing was accepted that is not kept.
  auto again = f.StateBytes(*f.Save());
  CACT_FUZZ_CHECK(again.ok() && *again == bytes, "an accepted state round-trips");
  if (f.position() < TheWorld().model->max_seq_len()) {
    const int32_t one[1] = {3};
    std::vector<float> logits;
    CACT_FUZZ_CHECK(f.Feed(one, &logits, false).ok(), "a restored state continues");
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::SingleThreaded();
  if (const char* dir = std::getenv("CACT_FUZZ_WRITE_SEEDS")) {
    WriteSeeds(dir);
    std::exit(0);
  }
  TheWorld();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  World& w = TheWorld();
  Forward& f = *w.forwards[data[0] % w.forwards.size()];
  std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  if (!bytes.starts_with(PromptCache::kMagic)) {
    if (data[0] & 0x80) {
      TryPool(bytes);
    } else {
      TryState(f, bytes);
    }
    return 0;
  }
  if (bytes.size() >= 44) {
    const auto sum = Sha256Digest(std::span<const uint8_t>(
        reinterpret_cast<const uint8_t*>(bytes.data()) + 44, bytes.size() - 44));
    bytes.replace(12, 32, reinterpret_cast<const char*>(sum.data()), 32);
  }
  auto parsed = PromptCache::Parse(bytes, "fuzz.cache");
  if (!parsed.ok()) {
    CACT_FUZZ_CHECK(parsed.status().code() == absl::StatusCode::kDataLoss,
                    "file errors are DataLoss");
    return 0;
  }
  CACT_FUZZ_CHECK(parsed->entries.size() <= PromptCache::kMaxEntries, "entries bounded");
  for (const PromptCache::Entry& e : parsed->entries) TryState(f, e.state);
  return 0;
}
