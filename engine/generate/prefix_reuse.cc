#include "engine/generate/prefix_reuse.h"

#include <algorithm>

#include "engine/forward_paths.h"
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

absl::StatusOr<PrefixReuse::Source> PrefixReuse::Start(std::span<const int32_t> prefix) {
  if (entries_.empty())
    return absl::FailedPreconditionError("PrefixReuse::Start before ForwardFor");
  Entry& e = entries_.front();
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
    CACT_RETURN_IF_ERROR(file_->Load({.model_sha256 = e.model_sha256,
                                      .path = e.forward->name(),
                                      .window = e.options.attn.window,
                                      .sink = e.options.attn.sink,
                                      .keep_hidden = e.options.keep_hidden}));
    if (const std::string_view* bytes = file_->Find(prefix)) {
      absl::StatusOr<std::unique_ptr<Forward::State>> state =
          e.forward->StateFromBytes(*bytes, file_->path());
      if (state.ok()) {
        // Not kept in memory as well: the file's bytes serve the next run too.
        CACT_RETURN_IF_ERROR(e.forward->Adopt(std::move(state).value()));
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
    CACT_ASSIGN_OR_RETURN(std::string bytes, e.forward->StateBytes(*state));
    CACT_RETURN_IF_ERROR(file_->Store(prefix, std::move(bytes)));
  }
  remember(std::move(state));
  return Source::kFed;
}

}  // namespace cact
