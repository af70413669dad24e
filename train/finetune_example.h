// One parsed JSONL line -> a FinetuneExample, as the official read_examples/from_chat do it
// (see finetune_data.h for the rules); and Python's str.strip(), which the official code
// applies to lines, reasoning, system prompts and chat-form argument strings.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "train/finetune_data.h"

namespace cact::train {

// Python's str.strip(): PythonStrip of engine/text/chat_template.h, which the chat
// template's v2.0.12 system turn uses too.
std::string_view PyStrip(std::string_view s);

// The example of one line, or nullopt when the official reader would skip it. Errors are
// InvalidArgument "`where`: "field" ..." (where = "file:line").
absl::StatusOr<std::optional<FinetuneExample>> ExampleFromJson(const nlohmann::ordered_json& line,
                                                               const std::string& where);

}  // namespace cact::train
