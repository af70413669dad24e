// The tools-file parser and the tool-call grammar over arbitrary input: the bytes before the
// first NUL are the tools JSON, the bytes after it drive a walk through the grammar.
// ParseToolCatalog returns a catalog or an InvalidArgument naming the file; for an accepted
// catalog the grammar is built, each walk byte picks one of the bytes the state accepts
// (all 256 tried on copies: a live state always accepts one), and ShortestCompletion()
// must finish the answer from wherever the walk stopped (and be empty exactly when Done()).
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "engine/toolcall/tool_call_grammar.h"
#include "engine/toolcall/tool_schema.h"
#include "fuzz_common.h"

using namespace cact;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 16384) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view json = input.substr(0, nul);
  const std::string_view walk = nul == std::string_view::npos ? "" : input.substr(nul + 1);

  auto catalog = ParseToolCatalog(json, "fuzz.json");
  if (!catalog.ok()) {
    CACT_FUZZ_CHECK(catalog.status().code() == absl::StatusCode::kInvalidArgument,
                    "a refused tools file is InvalidArgument");
    const std::string message(catalog.status().message());
    CACT_FUZZ_CHECK(message.starts_with("fuzz.json: "), "the error names the file");
    return 0;
  }
  CACT_FUZZ_CHECK(catalog->declarations.size() == catalog->tools.size(), "one declaration a tool");
  for (const ToolSpec& t : catalog->tools)
    CACT_FUZZ_CHECK(
        !t.name.empty() && t.arguments >= 0 && size_t(t.arguments) < catalog->nodes.size(),
        "a tool has a name and an arguments node");
  const ToolCallGrammar grammar(std::move(*catalog));

  GrammarState state(grammar);
  std::vector<uint8_t> next;
  for (size_t i = 0; i < walk.size() && i < 256 && !state.Done(); ++i) {
    next.clear();
    for (int c = 0; c < 256; ++c) {
      GrammarState copy = state;
      if (copy.Feed(uint8_t(c))) next.push_back(uint8_t(c));
    }
    CACT_FUZZ_CHECK(!next.empty(), "a state that is not Done() accepts some byte");
    CACT_FUZZ_CHECK(state.Feed(next[uint8_t(walk[i]) % next.size()]), "an accepted byte feeds");
  }
  if (state.InThink()) {
    GrammarState exit = state;
    CACT_FUZZ_CHECK(exit.Feed(state.ThinkExit()) && !exit.InThink(), "ThinkExit leaves the block");
  }
  const std::string completion = state.ShortestCompletion();
  CACT_FUZZ_CHECK(completion.empty() == state.Done(), "completion empty exactly when Done()");
  GrammarState end = state;
  CACT_FUZZ_CHECK(end.Feed(completion) && end.Done(), "the shortest completion finishes");
  return 0;
}
