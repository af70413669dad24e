#include "engine/chat_template.h"

#include <algorithm>

#include "engine/python_json.h"

namespace cact {
namespace {

constexpr std::string_view kImStart = "<|im_start|>";
constexpr std::string_view kImEnd = "<|im_end|>";
constexpr std::string_view kToolsStart = "<tools>";
constexpr std::string_view kToolsEnd = "</tools>";

// Python's str.strip() for the whitespace a system prompt realistically carries.
std::string_view Strip(std::string_view s) {
  constexpr std::string_view ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// Everything up to and including </tools>: the part pinned as the KV sink.
std::string ToolsPrefix(std::string_view tools_json, std::optional<std::string_view> system) {
  std::string out;
  const std::string_view sys = system ? Strip(*system) : std::string_view();
  if (!sys.empty()) ((((out += kImStart) += "system\n") += sys) += kImEnd) += "\n";
  ((((out += kImStart) += "user\n") += kToolsStart) += tools_json) += kToolsEnd;
  return out;
}

}  // namespace

absl::StatusOr<std::string> CompactToolsJson(std::string_view json_text) {
  absl::StatusOr<nlohmann::ordered_json> j = ParseJsonForPython(json_text);
  if (!j.ok())
    return absl::InvalidArgumentError("tools JSON is malformed: " +
                                      std::string(j.status().message()));
  if (!j->is_array())
    return absl::InvalidArgumentError(
        std::string("tools JSON must be an array of tool declarations, found ") + j->type_name());
  return PythonJsonDumps(*j);
}

std::string RenderChatText(std::string_view tools_json, std::string_view query,
                           std::optional<std::string_view> system) {
  std::string out = ToolsPrefix(tools_json, system);
  ((((((out += "\n") += query) += kImEnd) += "\n") += kImStart) += "assistant\n");
  return out;
}

absl::StatusOr<ChatPrompt> BuildChatPrompt(const Tokenizer& tokenizer, std::string_view tools_json,
                                           std::string_view query,
                                           std::optional<std::string_view> system) {
  auto compact = CompactToolsJson(tools_json);
  if (!compact.ok()) return compact.status();
  ChatPrompt p;
  p.text = RenderChatText(*compact, query, system);
  p.ids.push_back(tokenizer.bos_id());
  for (int32_t id : tokenizer.Encode(p.text)) p.ids.push_back(id);
  // </tools> is a user-defined piece, so no merge crosses it and the prefix's tokens are
  // exactly the first tokens of the whole prompt.
  const std::vector<int32_t> prefix = tokenizer.Encode(ToolsPrefix(*compact, system));
  p.tools_prefix = uint32_t(prefix.size() + 1);
  if (p.tools_prefix > p.ids.size() || !std::equal(prefix.begin(), prefix.end(), p.ids.begin() + 1))
    return absl::InternalError("chat template: the tools prefix does not tokenize as a prefix");
  return p;
}

}  // namespace cact
