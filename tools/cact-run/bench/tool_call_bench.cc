#include "tools/cact-run/bench/tool_call_bench.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "engine/generate/prefix_reuse.h"
#include "engine/generate/prompt_cache.h"
#include "engine/toolcall/tool_call_runner.h"
#include "lib/resources.h"
#include "lib/status.h"

namespace cact {
namespace {

// Four small tools and a one-line query: about 100 prompt tokens with the needle2 tokenizer.
constexpr const char* kTools = R"([
{"name":"get_weather","description":"Current weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["c","f"]}},"required":["city"]}},
{"name":"set_timer","description":"Start a timer","parameters":{"type":"object","properties":{"minutes":{"type":"integer"}},"required":["minutes"]}},
{"name":"send_message","description":"Text a contact","parameters":{"type":"object","properties":{"to":{"type":"string"},"body":{"type":"string"}},"required":["to","body"]}},
{"name":"play_song","description":"Play a song","parameters":{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}}])";
constexpr const char* kQuery = "What's the weather like in Lisbon today?";

}  // namespace

absl::StatusOr<ToolCallFigures> MeasureToolCalls(const ToolCallBenchOptions& o) {
  ToolCallFigures f;
  f.threads = o.threads;
  ToolCallRequest req;
  req.run.model_path = o.model_path;
  req.run.path = o.path;
  req.run.threads = int(o.threads);
  req.run.max_new_tokens = o.max_tokens;
  req.tools_file = "bench tools";
  req.tools_json = kTools;
  req.query = kQuery;
  // Warm calls: a process that keeps its model and the prefix state, and a file of that
  // state in the temporary directory.
  CACT_ASSIGN_OR_RETURN(std::unique_ptr<Model> kept, Model::Open(o.model_path));
  CACT_ASSIGN_OR_RETURN(Tokenizer tok,
                        Tokenizer::FromBytes(kept->file().tokenizer_blob(), kept->path()));
  const VocabularyTrie trie(tok);
  PrefixReuse reuse;
  char file_name[] = "/tmp/cact-bench-prompt-cache-XXXXXX";
  const int fd = mkstemp(file_name);
  if (fd < 0) return absl::InternalError("bench: cannot create a temporary prompt cache");
  ::close(fd);
  struct Remove {
    const char* path;
    ~Remove() { std::remove(path); }
  } remove_file{file_name};
  auto warm_request = [&](const ToolCallRequest& base, const Model* model, PrefixReuse* pr) {
    ToolCallRequest w = base;
    w.run.model = model;
    w.run.tokenizer = &tok;
    w.trie = &trie;
    w.run.prefix_reuse = pr;
    return w;
  };
  for (uint32_t r = 0; r < o.reps; ++r) {
    req.grammar = true;
    req.run.ignore_eos = false;
    CACT_ASSIGN_OR_RETURN(const ToolCallResult c, RunToolCall(req));
    if (!c.valid) return absl::InternalError("bench: the constrained answer is invalid");
    const RunTimings& t = c.run.timings;
    f.prompt_tokens = t.prompt_tokens;
    f.total_ms.push_back(c.total_ms);
    f.prefill_ms.push_back(t.prefill_ms);
    f.answer_tokens.push_back(double(c.run.generated_ids.size() + 1));  // + <|im_end|>

    // Warm in the process (the first repetition also saves the prefix: not counted).
    if (r == 0) CACT_RETURN_IF_ERROR(RunToolCall(warm_request(req, kept.get(), &reuse)).status());
    CACT_ASSIGN_OR_RETURN(const ToolCallResult w,
                          RunToolCall(warm_request(req, kept.get(), &reuse)));
    if (!w.run.prefix_reused || w.run.generated_ids != c.run.generated_ids)
      return absl::InternalError("bench: the warm call differs from the cold one");
    f.warm_ms.push_back(w.total_ms);
    f.warm_prefill_ms.push_back(w.run.timings.prefill_ms);

    // Warm from the file, as a new process: open the model, load the file, restore.
    {
      if (r == 0) {
        PromptCache cache(file_name, "bench");
        PrefixReuse writer;
        writer.UseFile(&cache);
        CACT_RETURN_IF_ERROR(RunToolCall(warm_request(req, kept.get(), &writer)).status());
        f.prompt_cache_bytes = cache.file_bytes();
      }
      Stopwatch clock;
      CACT_ASSIGN_OR_RETURN(std::unique_ptr<Model> fresh, Model::Open(o.model_path));
      const double open_ms = clock.Millis();
      PromptCache cache(file_name, "bench");
      PrefixReuse reader;
      reader.UseFile(&cache);
      CACT_ASSIGN_OR_RETURN(const ToolCallResult l,
                            RunToolCall(warm_request(req, fresh.get(), &reader)));
      if (!l.run.prefix_from_file || l.run.generated_ids != c.run.generated_ids)
        return absl::InternalError("bench: the call from the prompt cache differs");
      f.file_ms.push_back(open_ms + l.total_ms);
    }
    // Free decoding of as many steps, back to back with the constrained run.
    req.grammar = false;
    req.run.ignore_eos = true;
    req.run.max_new_tokens = std::max<uint32_t>(t.decode_steps + 1, 2);
    CACT_ASSIGN_OR_RETURN(const ToolCallResult free, RunToolCall(req));
    req.run.max_new_tokens = o.max_tokens;
    const RunTimings& ft = free.run.timings;
    if (t.decode_steps == 0 || ft.decode_steps == 0) continue;
    f.constrained_tps.push_back(t.decode_steps / ((t.decode_ms + c.grammar.mask_ms) / 1e3));
    f.free_tps.push_back(ft.decode_steps / (ft.decode_ms / 1e3));
    f.mask_share.push_back(c.grammar.mask_ms / t.decode_ms);
    std::fprintf(stderr, "\r[tool call] t%u rep %u/%u: %.1f ms cold, %.1f ms warm   ", o.threads,
                 r + 1, o.reps, c.total_ms, f.warm_ms.back());
  }
  std::fprintf(stderr, "\n");
  return f;
}

}  // namespace cact
