#include "engine/generate/runner.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "lib/counted.h"
#include "engine/forward_paths.h"
#include "engine/text/chat_template.h"
#include "engine/text/tokenizer.h"
#include "lib/cpu_features.h"
#include "lib/npy.h"
#include "lib/resources.h"
#include "lib/status.h"

namespace cact {
namespace {

absl::Status BadRequest(const std::string& what) { return absl::InvalidArgumentError(what); }

// The prompt ids plus what the chat template adds.
struct Prompt {
  std::vector<int32_t> ids;
  bool chat = false;
  uint32_t tools_prefix = 0;
};

absl::StatusOr<Prompt> BuildPrompt(const RunRequest& req, const Tokenizer* tok) {
  const int sources = int(req.tokens.has_value()) + int(req.prompt.has_value()) +
                      int(req.tools_json.has_value() || req.query.has_value()) +
                      int(req.chat_prompt.has_value());
  if (sources == 0)
    return BadRequest(
        "no prompt: give token ids, a text prompt, or tool declarations with a query");
  if (sources > 1)
    return BadRequest(
        "give only one of token ids, a text prompt and tool declarations with a query");
  Prompt p;
  if (req.tokens) {
    if (req.tokens->empty()) return BadRequest("the token id list is empty");
    p.ids = *req.tokens;
    return p;
  }
  if (!tok) return BadRequest("the model's tokenizer could not be read");
  if (req.chat_prompt) {
    p.ids = req.chat_prompt->ids;
    p.chat = true;
    p.tools_prefix = req.chat_prompt->tools_prefix;
    return p;
  }
  if (req.prompt) {
    p.ids.push_back(tok->bos_id());
    for (int32_t id : tok->Encode(*req.prompt)) p.ids.push_back(id);
    return p;
  }
  if (!req.tools_json || !req.query) return BadRequest("tool declarations and a query go together");
  std::optional<std::string_view> system;
  if (req.system) system = *req.system;
  CACT_ASSIGN_OR_RETURN(ChatPrompt chat, BuildChatPrompt(*tok, *req.tools_json, *req.query, system,
                                                         req.chat_template));
  p.ids = std::move(chat.ids);
  p.chat = true;
  p.tools_prefix = chat.tools_prefix;
  return p;
}

// Streams decoded text, holding back while the tail is an incomplete run of byte pieces.
class TextStream {
 public:
  TextStream(const Tokenizer* tok, const std::function<void(std::string_view)>& sink)
      : sink_(sink) {
    if (tok) decoder_.emplace(*tok);
  }
  void Add(int32_t id) {
    if (!decoder_) return;
    decoder_->Add(id, &text_);
    if (!decoder_->holding()) Emit();  // else wait for the character to complete
  }
  void Flush() {
    if (!decoder_) return;
    decoder_->Flush(&text_);
    Emit();
  }
  const std::string& text() const { return text_; }

 private:
  void Emit() {
    if (text_.size() > emitted_ && sink_) sink_(std::string_view(text_).substr(emitted_));
    emitted_ = text_.size();
  }
  std::optional<TokenDecoder> decoder_;
  const std::function<void(std::string_view)>& sink_;
  std::string text_;
  size_t emitted_ = 0;
};

absl::Status WriteHidden(const std::string& dir, const Forward& fwd, const Model& model) {
  // DIR itself is created like an output file would be; its parent must exist (no tree of
  // directories from a typo).
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec) && !std::filesystem::create_directory(dir, ec))
    return absl::InvalidArgumentError(
        dir + ": --dump-hidden: cannot create the directory" +
        (ec ? ": " + ec.message() : std::string(" (a file of that name exists)")));
  const std::vector<float>& h = fwd.hidden();
  return WriteNpy(dir + "/hidden.npy", h.data(),
                  {model.num_layers(), fwd.position(), model.d_model()});
}

// A window, sink or length the model cannot hold is refused, never capped: the same rule as
// cact-quant's --kv-window.
absl::Status CheckLimits(const Model& model, const RunRequest& req, size_t prompt_tokens,
                         uint32_t window, uint32_t sink) {
  const uint32_t max = model.max_seq_len();
  if (window > max)
    return absl::InvalidArgumentError(absl::StrFormat(
        "--window %d is more than the model's max_seq_len %d", window, max));
  if (sink > max)
    return absl::InvalidArgumentError(absl::StrFormat(
        "--sink %d is more than the model's max_seq_len %d", sink, max));
  // Generation feeds every new token but the last; validation feeds each decode step (its
  // default number adapts: ValidateForwards stops at max_seq_len).
  const uint64_t fed = req.validate ? (req.validate_steps_given ? req.validate_steps : 0)
                                    : (req.max_new_tokens ? req.max_new_tokens - 1 : 0);
  if (prompt_tokens + fed > max) {
    const char* flag = req.validate ? "-n (decode steps)" : "-n";
    const uint64_t n = req.validate ? req.validate_steps : req.max_new_tokens;
    const uint64_t most = max - prompt_tokens + (req.validate ? 0 : 1);
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s %d: the prompt's %d tokens and %d more need %d positions, the model has %d "
        "(max_seq_len); at most %d fit",
        flag, n, prompt_tokens, n, prompt_tokens + fed, max, most));
  }
  return absl::OkStatus();
}

// Threads for `path` (as --path names it): -t when given, else see RunRequest::threads.
int ThreadsFor(const RunRequest& req, const std::string& path, const Model& model) {
  return req.threads > 0 ? req.threads : AutoThreads(path, model.geometry().num_kv_heads);
}

// The probe heads over the fed tokens. A chat prompt's tools prefix and the rest are pooled
// as two blocks in every run, so a prefix restored from a prompt cache (which keeps the
// prefix's pool, not its lane means) gives the same bits as one fed here.
absl::StatusOr<ProbeOutputs> RunProbeHeads(const Model& model, std::span<const int32_t> fed,
                                           const Prompt& prompt, const Forward& fwd, int32_t pad_id,
                                           const PrefixReuse* reuse, int threads) {
  const std::vector<float>& hidden = fwd.hidden_by_position();
  const size_t P = prompt.tools_prefix, row = size_t(model.num_layers()) * model.d_model();
  if (!prompt.chat || P == 0 || P >= fed.size()) {
    return ComputeProbeHeads(model, fed, hidden, pad_id, HiddenLayout::kByPosition);
  }
  ProbeBlock blocks[2];
  const size_t first = fwd.hidden_from();
  if (first == 0) {
    if (hidden.size() < P * row) return absl::InternalError("probe heads: the prefix's rows are missing");
    CACT_ASSIGN_OR_RETURN(
        blocks[0], PoolProbeBlock(model, fed.first(P), std::span(hidden).first(P * row), pad_id,
                                  HiddenLayout::kByPosition, threads));
  } else if (first == P && reuse && reuse->prefix_pool()) {
    blocks[0] = *reuse->prefix_pool();
  } else {
    return absl::InternalError("probe heads: the prefix's lane means were not kept");
  }
  const size_t skip = (P - first) * row;
  if (hidden.size() < skip) return absl::InternalError("probe heads: rows missing");
  CACT_ASSIGN_OR_RETURN(
      blocks[1], PoolProbeBlock(model, fed.subspan(P), std::span(hidden).subspan(skip), pad_id,
                                HiddenLayout::kByPosition, threads));
  return FinishProbeBlocks(model, blocks);
}

}  // namespace

double RunTimings::prefill_tokens_per_s() const {
  return prefill_ms > 0 ? prompt_tokens / (prefill_ms / 1e3) : 0;
}
double RunTimings::decode_tokens_per_s() const {
  return decode_ms > 0 ? decode_steps / (decode_ms / 1e3) : 0;
}

absl::StatusOr<RunResult> RunModel(const RunRequest& req,
                                   const std::function<void(std::string_view)>& on_text) {
  RunResult r;
  Stopwatch clock;
  std::unique_ptr<Model> opened;
  if (!req.model) {
    CACT_ASSIGN_OR_RETURN(opened, Model::Open(req.model_path));
  }
  const Model& model = req.model ? *req.model : *opened;
  r.timings.open_ms = clock.Millis();

  clock.Reset();
  std::optional<Tokenizer> own_tokenizer;
  const Tokenizer* tokenizer = req.tokenizer;
  if (!tokenizer) {
    if (auto t = Tokenizer::FromBytes(model.file().tokenizer_blob(), model.path()); t.ok()) {
      own_tokenizer = std::move(t).value();
      tokenizer = &*own_tokenizer;
    }
  }
  CACT_ASSIGN_OR_RETURN(const Prompt prompt, BuildPrompt(req, tokenizer));
  const int32_t pad_id = tokenizer ? tokenizer->pad_id() : 0;
  r.timings.tokenize_ms = clock.Millis();
  r.prompt_ids = prompt.ids;
  r.timings.prompt_tokens = uint32_t(prompt.ids.size());
  CACT_RETURN_IF_ERROR(CheckFeed(model, 0, prompt.ids));

  r.window = req.window.value_or(model.kv_window());
  r.sink = req.sink.value_or(prompt.chat ? prompt.tools_prefix : 0);
  CACT_RETURN_IF_ERROR(CheckLimits(model, req, prompt.ids.size(), r.window, r.sink));
  ForwardOptions opt;
  opt.attn = {r.window, r.sink};
  opt.keep_hidden = !req.dump_hidden_dir.empty() || req.probes || req.validate;
  const std::string path = req.validate && req.path == "auto" ? "fast" : req.path;
  opt.threads = ThreadsFor(req, path, model);
  r.threads = opt.threads;

  if (req.validate) {
    clock.Reset();
    ForwardOptions ref_opt = opt;
    ref_opt.threads = ThreadsFor(req, "ref", model);
    CACT_ASSIGN_OR_RETURN(const std::unique_ptr<Forward> ref,
                          MakeForwardPath(model, "ref", ref_opt));
    CACT_ASSIGN_OR_RETURN(const std::unique_ptr<Forward> cand, MakeForwardPath(model, path, opt));
    r.timings.load_ms = r.timings.open_ms + clock.Millis();
    r.path_name = cand->name();
    CACT_ASSIGN_OR_RETURN(r.validation,
                          ValidateForwards(*ref, *cand, prompt.ids, req.validate_steps,
                                           model.num_layers(), req.thresholds));
    r.timings.peak_rss_bytes = PeakRssBytes();
    return r;
  }

  clock.Reset();
  const bool all_rows = !req.logits_path.empty() && !req.last_only;
  // The tools prefix is reused when the caller keeps one (its logits are never needed).
  const bool reuse = req.prefix_reuse && !all_rows && prompt.chat && prompt.tools_prefix > 0 &&
                     prompt.tools_prefix < prompt.ids.size();
  std::unique_ptr<Forward> own;
  Forward* fwd_ptr = nullptr;
  if (reuse) {
    if (!req.model)
      return absl::FailedPreconditionError(
          "prefix reuse keeps forwards of the model: pass a loaded model (RunRequest::model)");
    CACT_ASSIGN_OR_RETURN(fwd_ptr, req.prefix_reuse->ForwardFor(model, req.path, opt));
  } else {
    CACT_ASSIGN_OR_RETURN(own, MakeForwardPath(model, req.path, opt));
    fwd_ptr = own.get();
  }
  Forward& fwd = *fwd_ptr;
  r.path_name = fwd.name();
  r.timings.load_ms = r.timings.open_ms + clock.Millis();

  // Prefill (with reuse: the saved prefix restored, or fed and saved, then the rest).
  clock.Reset();
  std::vector<float> logits;
  std::span<const int32_t> feed(prompt.ids);
  if (reuse) {
    std::optional<int32_t> probe_pad;
    if (req.probes) probe_pad = pad_id;
    CACT_ASSIGN_OR_RETURN(const PrefixReuse::Source source,
                          req.prefix_reuse->Start(feed.first(prompt.tools_prefix), probe_pad));
    r.prefix_reused = source != PrefixReuse::Source::kFed;
    r.prefix_from_file = source == PrefixReuse::Source::kFile;
    feed = feed.subspan(prompt.tools_prefix);
  }
  CACT_RETURN_IF_ERROR(fwd.Feed(feed, &logits, all_rows));
  r.timings.prefill_ms = clock.Millis();
  const size_t V = model.vocab();
  if (!req.logits_path.empty()) {
    const size_t rows = logits.size() / V;
    CACT_RETURN_IF_ERROR(WriteNpy(req.logits_path, logits.data(), {rows, V}));
  }

  // Generation: the first token comes from the prefill logits, each later one needs a step.
  Sampler sampler(req.sampling);
  TextStream stream(tokenizer, on_text);
  const int32_t eos = tokenizer ? tokenizer->eos_id() : 1;
  const int32_t im_end = tokenizer ? tokenizer->PieceToId("<|im_end|>") : -1;
  std::vector<float> last(logits.end() - V, logits.end());
  // Tokens chosen and not yet fed: a token the logits cannot change joins the next feed.
  std::vector<int32_t> unfed;
  auto feed_unfed = [&]() -> absl::Status {
    if (unfed.empty()) return absl::OkStatus();
    Stopwatch decode_clock;
    CACT_RETURN_IF_ERROR(fwd.Feed(unfed, &last, false));
    r.timings.decode_ms += decode_clock.Millis();
    r.timings.decode_steps += uint32_t(unfed.size());
    ++r.timings.decode_feeds;
    unfed.clear();
    return absl::OkStatus();
  };
  auto choose = [&] { return req.choose_next ? req.choose_next(last) : sampler.Sample(last); };
  int32_t next = -1;
  if (req.max_new_tokens > 0) {
    next = choose();
    r.timings.first_token_ms = r.timings.tokenize_ms + r.timings.prefill_ms;
  }
  while (next >= 0) {
    if (!req.ignore_eos && (next == eos || (prompt.chat && next == im_end))) {
      r.stopped_by = next;
      break;
    }
    r.generated_ids.push_back(next);
    stream.Add(next);
    // The last token of the budget or of the context is never fed.
    if (r.generated_ids.size() == req.max_new_tokens ||
        fwd.position() + unfed.size() >= model.max_seq_len())
      break;
    unfed.push_back(next);
    next = req.next_without_logits ? req.next_without_logits() : kNeedsLogits;
    if (next != kNeedsLogits) continue;
    CACT_RETURN_IF_ERROR(feed_unfed());
    next = choose();
  }
  // Every token chosen before the end was fed, as a step at a time would have.
  CACT_RETURN_IF_ERROR(feed_unfed());
  stream.Flush();
  r.text = stream.text();
  r.timings.generated_tokens = uint32_t(r.generated_ids.size());

  if (!req.dump_hidden_dir.empty())
    CACT_RETURN_IF_ERROR(WriteHidden(req.dump_hidden_dir, fwd, model));
  if (req.probes) {
    std::vector<int32_t> fed = prompt.ids;
    fed.insert(fed.end(), r.generated_ids.begin(),
               r.generated_ids.begin() + r.timings.decode_steps);
    Stopwatch probes_clock;
    CACT_ASSIGN_OR_RETURN(r.probes, RunProbeHeads(model, fed, prompt, fwd, pad_id,
                                                  reuse ? req.prefix_reuse : nullptr, r.threads));
    r.timings.probes_ms = probes_clock.Millis();
  }
  r.timings.peak_rss_bytes = PeakRssBytes();
  return r;
}

std::string ThreadsText(int n) { return absl::StrFormat("%d thread%s", n, n == 1 ? "" : "s"); }

std::string TimingLine(const RunResult& r) {
  const RunTimings& t = r.timings;
  if (r.validation)
    return absl::StrFormat(
        "cact-run [validate %s vs reference, %s, window %d, sink %d]: load %.1f ms "
        "| tokenize %.2f ms | prompt %s | peak RSS %.1f MiB",
        r.path_name, ThreadsText(r.threads), r.window, r.sink, t.load_ms, t.tokenize_ms,
        Counted(t.prompt_tokens, "token"), double(t.peak_rss_bytes) / (1 << 20));
  std::string s = absl::StrFormat(
      "cact-run [%s, %s, window %d, sink %d]: load %.1f ms (open %.1f) | tokenize %.2f ms | "
      "prompt %s | prefill %.1f ms (%.1f tok/s)",
      r.path_name, ThreadsText(r.threads), r.window, r.sink, t.load_ms, t.open_ms, t.tokenize_ms,
      Counted(t.prompt_tokens, "token"), t.prefill_ms, t.prefill_tokens_per_s());
  if (t.generated_tokens) {
    s += absl::StrFormat(" | first token %.1f ms | decode %s %.1f tok/s", t.first_token_ms,
                         Counted(t.decode_steps, "step"), t.decode_tokens_per_s());
    if (t.decode_feeds != t.decode_steps)
      s += absl::StrFormat(" (in %s)", Counted(t.decode_feeds, "forward call"));
  }
  s += absl::StrFormat(" | peak RSS %.1f MiB", double(t.peak_rss_bytes) / (1 << 20));
  return s;
}

std::string ResultJson(const RunResult& r) {
  const RunTimings& t = r.timings;
  nlohmann::ordered_json j = {{"path", r.path_name},
                              {"threads", r.threads},
                              {"window", r.window},
                              {"sink", r.sink},
                              {"prompt_tokens", t.prompt_tokens},
                              {"prompt_ids", r.prompt_ids},
                              {"generated_ids", r.generated_ids},
                              {"text", r.text}};
  j["timings"] = {{"open_ms", t.open_ms},
                  {"load_ms", t.load_ms},
                  {"tokenize_ms", t.tokenize_ms},
                  {"prompt_tokens", t.prompt_tokens},
                  {"prefill_ms", t.prefill_ms},
                  {"prefill_tokens_per_s", t.prefill_tokens_per_s()},
                  {"first_token_ms", t.first_token_ms},
                  {"generated_tokens", t.generated_tokens},
                  {"decode_steps", t.decode_steps},
                  {"decode_feeds", t.decode_feeds},
                  {"decode_ms", t.decode_ms},
                  {"decode_tokens_per_s", t.decode_tokens_per_s()},
                  {"probes_ms", t.probes_ms},
                  {"peak_rss_bytes", t.peak_rss_bytes}};
  if (r.probes) {
    j["probes"]["retrieval"] = r.probes->retrieval;
    if (r.probes->has_confidence) j["probes"]["confidence"] = r.probes->confidence;
  }
  if (r.validation) j["validation"] = nlohmann::ordered_json::parse(r.validation->ToJson());
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace cact
