// `--template NAME`: the release of the official chat template that renders a tools prompt
// (engine/text/chat_template.h; docs/tool-calls.md, "The format").
#pragma once
#include <string>

#include "CLI/CLI.hpp"
#include "engine/text/chat_template.h"

namespace cact {

// Adds the option to `app`, writing the name to `*name` (checked while parsing: an unknown
// name is a bad command line listing the accepted ones).
inline CLI::Option* AddTemplateOption(CLI::App& app, std::string* name) {
  *name = std::string(ChatTemplateName(kDefaultChatTemplate));
  return app
      .add_option("--template", *name,
                  "chat template of tools prompts: v2.0.12 (the official renderer today: "
                  "non-ASCII kept, system stripped) or v2.0.9 (non-ASCII as \\uxxxx, system as "
                  "given)")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            absl::StatusOr<ChatTemplate> t = ParseChatTemplate(s);
            return t.ok() ? std::string() : std::string(t.status().message());
          },
          "NAME"));
}

}  // namespace cact
