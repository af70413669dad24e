#include "engine/generate/prefix_reuse.h"

#include <algorithm>

#include "engine/forward_paths.h"
#include "engine/forward_state_bytes.h"
#include "lib/byte_io.h"
#include "lib/sha256.h"
#include "lib/status.h"

namespace cact {
namespace {

bool SameOptions(const ForwardOptions& a, const ForwardOptions& b) {
  return a.attn.window == b.attn.window && a.attn.sink == b.attn.sink && a.threads == b.threads &&
         a.keep_hidden == b.keep_hidden;
}

// Moves `it` to the front of `list` (most recently used first).
template <typename List>
void ToFront(List& list, typename List::iterator it) {
  list.splice(list.begin(), list, it);
}

}  // namespace

absl::StatusOr<Forward*> PrefixReuse::ForwardFor(const Model& model, const std::string& path,
                                                 const ForwardOptions& options) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->model != &model || it->path != path || !SameOptions(it->options, options)) continue;
    ToFront(entries_, it);
    return entries_.front().forward.get();
  }
  Entry e;
  CACT_ASSIGN_OR_RETURN(e.forward, MakeForwardPath(model, path, options));
  e.model = &model;
  e.path = path;
  e.options = options;
  entries_.push_front(std::move(e));
  if (entries_.size() > kMaxForwards) entries_.pop_back();
  return entries_.front().forward.get();
}

absl::StatusOr<PrefixReuse::Source> PrefixReuse::Start(std::span<const int32_t> prefix,
                                                      std::optional<int32_t> probe_pad) {
  if (entries_.empty())
    return absl::FailedPreconditionError("PrefixReuse::Start before ForwardFor");
  Entry& e = entries_.front();
  pool_.reset();
  // A file entry: u8 1 and the probe heads' pool of the prefix (its state then leaves out
  // the lane means), or u8 0; then the forward's state.
  const bool pooled = probe_pad && e.options.keep_hidden && !e.model->probe_heads().empty();
  auto remember = [&](std::unique_ptr<Forward::State> state) {
    e.saved.emplace_front(std::vector<int32_t>(prefix.begin(), prefix.end()), std::move(state));
    if (e.saved.size() > kMaxPrefixes) e.saved.pop_back();
  };
  for (auto it = e.saved.begin(); it != e.saved.end(); ++it) {
    if (!std::equal(it->first.begin(), it->first.end(), prefix.begin(), prefix.end())) continue;
    CACT_RETURN_IF_ERROR(e.forward->Restore(*it->second));
    ToFront(e.saved, it);
    ++hits_;
    return Source::kMemory;
  }
  if (file_) {
    if (e.model_sha256.empty()) e.model_sha256 = Sha256Hex(e.model->file().bytes().span());
    // A sink that is the prefix itself (the default: the tools prefix pinned) is keyed as 0,
    // so the prefixes of several tool sets share one file.
    const uint32_t sink = e.options.attn.sink == prefix.size() ? 0 : e.options.attn.sink;
    CACT_RETURN_IF_ERROR(file_->Load({.model_sha256 = e.model_sha256,
                                      .path = e.forward->name(),
                                      .window = e.options.attn.window,
                                      .sink = sink,
                                      .keep_hidden = e.options.keep_hidden}));
    if (const std::string_view* bytes = file_->Find(prefix)) {
      ByteReader r(*bytes, file_->path());
      uint8_t has_pool = 0;
      absl::Status st = r.Get("probe pool flag", &has_pool);
      ProbeBlock pool;
      if (st.ok() && has_pool != uint8_t(pooled))
        st = r.Bad("probe pool flag", 0,
                   pooled ? "no pool of the probe heads, which this run computes"
                          : "a pool of the probe heads, which this run does not compute");
      if (st.ok() && has_pool) st = state_bytes::GetProbeBlock(r, *e.model, &pool);
      absl::StatusOr<std::unique_ptr<Forward::State>> state =
          st.ok() ? e.forward->StateFromBytes(bytes->substr(r.offset()), file_->path(),
                                              r.offset())
                  : absl::StatusOr<std::unique_ptr<Forward::State>>(st);
      if (state.ok()) {
        // Not kept in memory as well: the file's bytes serve the next run too.
        CACT_RETURN_IF_ERROR(e.forward->Adopt(std::move(state).value()));
        if (has_pool) pool_ = std::move(pool);
        ++file_hits_;
        return Source::kFile;
      }
      file_->Distrust(std::string(state.status().message()));
    }
  }
  e.forward->Reset();
  CACT_RETURN_IF_ERROR(e.forward->Feed(prefix, nullptr, false));
  std::unique_ptr<Forward::State> state = e.forward->Save();
  ++misses_;
  if (!state) return Source::kFed;  // a path that cannot save: fed every time
  if (file_) {
    ByteWriter w;
    w.Put(uint8_t(pooled));
    if (pooled) {
      CACT_ASSIGN_OR_RETURN(
          const ProbeBlock pool,
          PoolProbeBlock(*e.model, prefix, e.forward->hidden_by_position(), *probe_pad,
                         HiddenLayout::kByPosition, e.options.threads));
      state_bytes::PutProbeBlock(w, pool);
    }
    CACT_ASSIGN_OR_RETURN(std::string bytes, e.forward->StateBytes(*state, !pooled));
    w.PutBytes(bytes);
    CACT_RETURN_IF_ERROR(file_->Store(prefix, std::move(w.bytes())));
  }
  remember(std::move(state));
  return Source::kFed;
}

}  // namespace cact
