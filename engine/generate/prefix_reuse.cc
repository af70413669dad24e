#include "engine/generate/prefix_reuse.h"

#include <algorithm>

#include "engine/forward_paths.h"
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

absl::StatusOr<bool> PrefixReuse::Start(std::span<const int32_t> prefix) {
  if (entries_.empty())
    return absl::FailedPreconditionError("PrefixReuse::Start before ForwardFor");
  Entry& e = entries_.front();
  for (auto it = e.saved.begin(); it != e.saved.end(); ++it) {
    if (!std::equal(it->first.begin(), it->first.end(), prefix.begin(), prefix.end())) continue;
    CACT_RETURN_IF_ERROR(e.forward->Restore(*it->second));
    ToFront(e.saved, it);
    ++hits_;
    return true;
  }
  e.forward->Reset();
  CACT_RETURN_IF_ERROR(e.forward->Feed(prefix, nullptr, false));
  std::unique_ptr<Forward::State> state = e.forward->Save();
  ++misses_;
  if (!state) return false;  // a path that cannot save: fed every time
  e.saved.emplace_front(std::vector<int32_t>(prefix.begin(), prefix.end()), std::move(state));
  if (e.saved.size() > kMaxPrefixes) e.saved.pop_back();
  return false;
}

}  // namespace cact
