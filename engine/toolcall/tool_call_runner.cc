#include "engine/toolcall/tool_call_runner.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "engine/text/chat_template.h"
#include "engine/text/python_json.h"
#include "engine/text/tokenizer.h"
#include "engine/toolcall/tool_retrieval.h"
#include "lib/resources.h"
#include "lib/status.h"
#include "lib/utf8.h"

namespace cact {
namespace {

using Json = nlohmann::ordered_json;

std::string_view StripWhitespace(std::string_view s) {
  const absl::string_view stripped =
      absl::StripAsciiWhitespace(absl::string_view(s.data(), s.size()));
  return std::string_view(stripped.data(), stripped.size());
}

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";
constexpr std::string_view kCallOpen = "<tool_call>", kCallClose = "</tool_call>";
constexpr std::string_view kImEnd = "<|im_end|>";

// The tools kept for the prompt (all of them unless the catalogue is larger than top_tools
// or does not fit the context), ranked by the contrastive head when the model has one.
struct Retrieval {
  std::vector<size_t> kept;
  std::string method = "none";
  std::vector<ToolConsidered> tools;
  uint32_t budget = 0;
};

absl::StatusOr<Retrieval> RetrieveTools(const ToolCallRequest& req, const ToolCatalog& catalog,
                                        const Model& model, const Tokenizer& tok) {
  Retrieval r;
  const size_t n = catalog.tools.size();
  // What the prompt costs without any tool, and what each declaration adds.
  std::optional<std::string_view> system;
  if (req.system) system = *req.system;
  const ChatTemplate t = req.run.chat_template;
  CACT_ASSIGN_OR_RETURN(const ChatPrompt bare, EncodeChatPrompt(tok, "[]", req.query, system, t));
  const int64_t room =
      int64_t(model.max_seq_len()) - int64_t(bare.ids.size()) - int64_t(req.run.max_new_tokens);
  if (room <= 0)
    return absl::InvalidArgumentError(absl::StrFormat(
        "the query alone takes %d tokens and the answer %d: more than max_seq_len %d",
        bare.ids.size(), req.run.max_new_tokens, model.max_seq_len()));
  r.budget = uint32_t(room);
  std::vector<std::string> declarations(n);
  std::vector<size_t> cost(n);
  for (size_t i = 0; i < n; ++i) {
    declarations[i] = PythonJsonDumps(catalog.declarations[i], ChatTemplateEnsuresAscii(t));
    cost[i] = tok.Encode(declarations[i]).size() + 1;
  }

  for (const ToolSpec& t : catalog.tools) {
    ToolConsidered c;
    c.name = t.name;
    r.tools.push_back(std::move(c));
  }
  const size_t total = std::accumulate(cost.begin(), cost.end(), size_t(0));
  if (n <= req.top_tools && total <= r.budget) {
    r.kept.resize(n);
    std::iota(r.kept.begin(), r.kept.end(), 0);
    return r;
  }

  std::vector<ToolScore> ranking;
  if (model.FindProbeHead(ProbeHead::kContrastive)) {
    r.method = "contrastive";
    auto embed = [&](std::string_view text) {
      std::vector<int32_t> ids = {tok.bos_id()};
      for (int32_t id : tok.Encode(text)) ids.push_back(id);
      // A declaration longer than the context is embedded by its beginning.
      if (ids.size() > model.max_seq_len()) ids.resize(model.max_seq_len());
      return ContrastiveEmbedding(model, req.run.path, ids, tok.pad_id());
    };
    CACT_ASSIGN_OR_RETURN(const std::vector<float> query, embed(req.query));
    std::vector<std::vector<float>> tools;
    for (const std::string& decl : declarations) {
      CACT_ASSIGN_OR_RETURN(std::vector<float> e, embed(decl));
      tools.push_back(std::move(e));
    }
    CACT_ASSIGN_OR_RETURN(ranking, RankToolsByEmbedding(query, tools));
  } else {
    r.method = "bm25";
    std::vector<ToolText> texts;
    for (const ToolSpec& t : catalog.tools) texts.push_back({t.name, t.description});
    ranking = RankToolsBm25(req.query, texts);
  }
  CACT_ASSIGN_OR_RETURN(const ToolSelection sel,
                        SelectTools(ranking, cost, req.top_tools, r.budget));
  r.kept = sel.kept;
  for (size_t i = 0; i < n; ++i) {
    r.tools[i].score = sel.tools[i].score;
    r.tools[i].rank = sel.tools[i].rank;
    r.tools[i].kept = sel.tools[i].kept;
    r.tools[i].dropped_by = ToolDropName(sel.tools[i].drop);
  }
  return r;
}

// Where a byte string stops being a valid answer, for the message of an invalid one.
std::string WhyInvalid(const ToolCallGrammar& grammar, std::string_view bytes) {
  GrammarState s(grammar);
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (!s.Feed(uint8_t(bytes[i]))) {
      const size_t from = i < 24 ? 0 : i - 24;
      return absl::StrFormat("not a valid tool call at byte %d (after \"%s\")", i,
                             ReplaceBadUtf8(bytes.substr(from, i - from)));
    }
  }
  return absl::StrFormat("the answer stops after %d bytes, before the call list is complete",
                         bytes.size());
}

}  // namespace

void ReadAnswer(const ToolCallGrammar& grammar, std::string_view bytes, ToolCallResult* out) {
  std::string_view text = bytes;
  if (!text.empty() && text[0] == ' ') text.remove_prefix(1);  // the dummy prefix
  if (text.ends_with(kImEnd)) text.remove_suffix(kImEnd.size());
  out->text = ReplaceBadUtf8(text);
  out->reasoning.clear();
  out->tool_calls = Json::array();
  if (text.starts_with(kThinkOpen)) {
    const size_t close = text.find(kThinkClose);
    const size_t end = close == std::string_view::npos ? text.size() : close;
    out->reasoning =
        ReplaceBadUtf8(StripWhitespace(text.substr(kThinkOpen.size(), end - kThinkOpen.size())));
  }
  GrammarState s(grammar);
  out->valid = s.Feed(bytes) && s.Done();
  if (!out->valid) {
    out->invalid_reason = WhyInvalid(grammar, bytes);
    return;
  }
  const size_t open = text.rfind(kCallOpen, text.rfind(kCallClose));
  const size_t body = open + kCallOpen.size();
  auto calls = ParseJsonForPython(text.substr(body, text.rfind(kCallClose) - body));
  if (!calls.ok()) {
    // The grammar only accepts JSON this parser reads; a failure here is a bug to report.
    out->valid = false;
    out->invalid_reason = "the call list does not parse: " + std::string(calls.status().message());
    return;
  }
  out->tool_calls = std::move(calls).value();
}

absl::StatusOr<ToolCallResult> RunToolCall(const ToolCallRequest& req) {
  Stopwatch total;
  ToolCallResult res;
  CACT_ASSIGN_OR_RETURN(const ToolCatalog catalog,
                        ParseToolCatalog(req.tools_json, req.tools_file));
  // A caller running many calls (eval) passes its loaded model and tokenizer.
  std::unique_ptr<Model> opened;
  if (req.run.prefix_reuse && !req.run.model)
    return absl::FailedPreconditionError(
        "prefix reuse keeps forwards of the model: pass a loaded model (RunRequest::model)");
  if (!req.run.model) {
    CACT_ASSIGN_OR_RETURN(opened, Model::Open(req.run.model_path));
  }
  const Model* model = req.run.model ? req.run.model : opened.get();
  const double open_ms = total.Millis();
  std::optional<Tokenizer> own_tokenizer;
  if (!req.run.tokenizer) {
    CACT_ASSIGN_OR_RETURN(own_tokenizer,
                          Tokenizer::FromBytes(model->file().tokenizer_blob(), model->path()));
  }
  const Tokenizer& tok = req.run.tokenizer ? *req.run.tokenizer : *own_tokenizer;

  Stopwatch clock;
  CACT_ASSIGN_OR_RETURN(const Retrieval retrieval, RetrieveTools(req, catalog, *model, tok));
  res.retrieval = retrieval.method;
  res.tools = retrieval.tools;
  res.tools_budget_tokens = retrieval.budget;
  res.retrieval_ms = clock.Millis();

  // The prompt and the grammar see the kept tools only: a dropped tool cannot be called.
  clock.Reset();
  ToolCatalog kept_catalog = KeepTools(catalog, retrieval.kept);
  const std::string kept_json = PythonJsonDumps(Json(kept_catalog.declarations));
  // The declarations' token costs were estimated one by one: the answer's budget is what
  // the actual prompt leaves of the context. RunModel feeds this prompt as it is.
  Stopwatch tokenize_clock;
  std::optional<std::string_view> system;
  if (req.system) system = *req.system;
  CACT_ASSIGN_OR_RETURN(ChatPrompt prompt,
                        EncodeChatPrompt(tok, kept_json, req.query, system, req.run.chat_template));
  const double tokenize_ms = tokenize_clock.Millis();
  const ToolCallGrammar grammar(std::move(kept_catalog));
  std::optional<VocabularyTrie> own_trie;
  if (!req.trie || !req.run.tokenizer) own_trie.emplace(tok);
  const VocabularyTrie& trie = own_trie ? *own_trie : *req.trie;
  const uint32_t budget = uint32_t(std::min<int64_t>(
      req.run.max_new_tokens, int64_t(model->max_seq_len()) - int64_t(prompt.ids.size())));
  std::optional<ToolCallDecoder> decoder;
  if (req.grammar) {
    CACT_ASSIGN_OR_RETURN(decoder, ToolCallDecoder::Create(grammar, trie,
                                                           {.max_tokens = budget,
                                                            .think_max = req.think_max,
                                                            .sampling = req.run.sampling}));
  }
  res.grammar_setup_ms = clock.Millis() - tokenize_ms;

  RunRequest run = req.run;
  run.max_new_tokens = budget;
  run.model = model;
  run.tokenizer = &tok;
  run.tools_json.reset();
  run.query.reset();
  run.system.reset();
  run.chat_prompt = std::move(prompt);
  run.probes = model->FindProbeHead(ProbeHead::kConfidence) != nullptr;
  if (decoder) {
    run.choose_next = [&](std::span<const float> logits) { return decoder->Next(logits); };
    if (req.feed_choiceless_together)
      run.next_without_logits = [&] { return decoder->NextWithoutLogits().value_or(kNeedsLogits); };
  }
  CACT_ASSIGN_OR_RETURN(res.run, RunModel(run));
  res.run.timings.open_ms += open_ms;
  res.run.timings.load_ms += open_ms;
  res.run.timings.tokenize_ms += tokenize_ms;  // the prompt was tokenized here
  if (budget > 0) res.run.timings.first_token_ms += tokenize_ms;

  std::string bytes;
  if (decoder) {
    bytes = decoder->bytes();
    res.grammar = decoder->stats();
  } else {
    for (int32_t id : res.run.generated_ids) bytes += trie.bytes(id);
    if (res.run.stopped_by == tok.PieceToId(kImEnd)) bytes += kImEnd;
  }
  ReadAnswer(grammar, bytes, &res);

  if (res.run.probes && res.run.probes->has_confidence) {
    res.confidence = 1.0 / (1.0 + std::exp(-double(res.run.probes->confidence)));
    if (req.min_confidence && *res.confidence < *req.min_confidence && !res.tool_calls.empty()) {
      res.suppressed = true;
      res.tool_calls = Json::array();
    }
  }
  res.total_ms = total.Millis();
  return res;
}

std::string ToolCallJson(const ToolCallResult& r) {
  const RunTimings& t = r.run.timings;
  Json j;
  j["text"] = r.text;
  j["reasoning"] = r.reasoning;
  j["tool_calls"] = r.tool_calls;
  j["valid"] = r.valid;
  if (!r.valid) j["invalid_reason"] = r.invalid_reason;
  j["confidence"] = r.confidence ? Json(*r.confidence) : Json(nullptr);
  j["suppressed_below_confidence"] = r.suppressed;
  j["retrieval"] = r.retrieval;
  j["tools_budget_tokens"] = r.tools_budget_tokens;
  Json considered = Json::array();
  for (const ToolConsidered& c : r.tools) {
    Json e = {{"name", c.name}, {"kept", c.kept}};
    if (r.retrieval != "none") {
      e["score"] = c.score;
      e["rank"] = c.rank;
      if (!c.kept) e["dropped_by"] = c.dropped_by;
    }
    considered.push_back(std::move(e));
  }
  j["tools_considered"] = std::move(considered);
  j["path"] = r.run.path_name;
  j["threads"] = r.run.threads;
  j["window"] = r.run.window;
  j["sink"] = r.run.sink;
  j["prefix_reused"] = r.run.prefix_reused;
  j["prefix_from_file"] = r.run.prefix_from_file;
  j["prompt_tokens"] = t.prompt_tokens;
  j["prompt_ids"] = r.run.prompt_ids;
  j["generated_ids"] = r.run.generated_ids;
  j["timings"] = {{"load_ms", t.load_ms},
                  {"retrieval_ms", r.retrieval_ms},
                  {"grammar_setup_ms", r.grammar_setup_ms},
                  {"tokenize_ms", t.tokenize_ms},
                  {"prefill_ms", t.prefill_ms},
                  {"decode_ms", t.decode_ms},
                  {"decode_steps", t.decode_steps},
                  {"decode_feeds", t.decode_feeds},
                  {"probes_ms", t.probes_ms},
                  {"mask_ms", r.grammar.mask_ms},
                  {"masked_steps", r.grammar.masked_steps},
                  {"forced_tokens", r.grammar.forced_tokens},
                  {"only_choices", r.grammar.only_choices},
                  {"generated_tokens", t.generated_tokens},
                  {"total_ms", r.total_ms},
                  {"peak_rss_bytes", t.peak_rss_bytes}};
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace cact
