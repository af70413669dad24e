#include "tools/cact-run/bench/bench_session.h"

#include <algorithm>
#include <cstdio>
#include <span>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/fast_forward.h"
#include "engine/forward.h"
#include "engine/model.h"
#include "lib/resources.h"
#include "lib/status.h"
#include "nlohmann/json.hpp"

namespace cact {
namespace {

// Shell-quotes one argument (single quotes; embedded ones closed and escaped).
std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

absl::StatusOr<std::string> CaptureStdout(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!p) return absl::InternalError("cannot run " + cmd);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (pclose(p) != 0) return absl::InternalError("command failed: " + cmd.substr(0, 200));
  return out;
}

absl::StatusOr<SessionFigures> MeasureSession(const SessionOptions& o) {
  if (o.reps == 0) return absl::InvalidArgumentError("session: reps must be >= 1");
  SessionFigures f;
  f.threads = o.threads;
  uint32_t max_seq = 0, window = 0;
  for (uint32_t r = 0; r < o.reps; ++r) {
    // Each repetition opens the file anew (the page cache is warm after the first).
    Stopwatch clock;
    CACT_ASSIGN_OR_RETURN(CactFile file, CactFile::Open(o.model_path));
    CACT_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::FromFile(std::move(file)));
    f.open_ms.push_back(clock.Millis());
    clock.Reset();
    ForwardOptions opt;
    opt.threads = int(o.threads);
    opt.attn.window = model->kv_window();
    const std::unique_ptr<Forward> fwd = MakeFastForward(*model, opt, FastForwardOptions{});
    f.setup_ms.push_back(clock.Millis());  // before its teardown
    max_seq = model->max_seq_len();
    window = model->kv_window();
  }
  if (o.session_tokens == 0 || o.run_binary.empty()) return f;
  if (o.prompt.empty()) return absl::InvalidArgumentError("session: no prompt ids");

  // The session: the prompt, then greedy decoding past EOS to the total.
  f.session_tokens = std::min(o.session_tokens, max_seq);
  f.prompt = std::max(1u, std::min(uint32_t(o.prompt.size()), f.session_tokens - 1));
  const std::span<const int32_t> ids(o.prompt.data(), f.prompt);
  const std::string cmd = absl::StrFormat(
      "%s %s --tokens %s -n %u -t %u --window %u --ignore-eos --json", Quote(o.run_binary),
      Quote(o.model_path), absl::StrJoin(ids, ","), f.session_tokens - f.prompt, o.threads, window);
  CACT_ASSIGN_OR_RETURN(std::string out, CaptureStdout(cmd));
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_discarded() || !j.contains("timings") || !j["timings"].contains("peak_rss_bytes"))
    return absl::InternalError("session: unexpected cact-run output: " + out.substr(0, 200));
  const auto& t = j["timings"];
  f.session_peak_rss_mb = t["peak_rss_bytes"].get<double>() / (1 << 20);
  f.session_load_ms = t["load_ms"].get<double>();
  f.session_decode_tps = t["decode_tokens_per_s"].get<double>();
  const uint32_t reached = f.prompt + t["generated_tokens"].get<uint32_t>();
  if (reached != f.session_tokens)
    return absl::InternalError(
        absl::StrFormat("session: reached %u positions, expected %u", reached, f.session_tokens));
  return f;
}

}  // namespace cact
