// cact-quant presets, and --scheme / --preset for build and requant.
#include <cstdio>

#include "quant/scheme_presets.h"
#include "tools/cact-quant/commands.h"

namespace cact::quant_tool {

absl::StatusOr<std::optional<Scheme>> ChosenScheme(const Options& o) {
  if (!o.scheme_preset.empty()) return SchemeFromPreset(o.scheme_preset);
  if (o.scheme.empty()) return std::nullopt;
  return ParseScheme(o.scheme);
}

std::string SchemeSource(const Options& o) {
  return o.scheme_preset.empty() ? "--scheme" : "--preset " + o.scheme_preset;
}

std::string PresetHelp() {
  absl::StatusOr<std::string> help = SchemePresetHelp();
  return help.ok() ? *help : "Presets: " + std::string(help.status().message()) + "\n";
}

int RunPresets(const Options& o) {
  Reporter rep(o);
  if (o.json) {
    absl::StatusOr<nlohmann::ordered_json> j = SchemePresetJson();
    if (!j.ok()) return rep.Fail(j.status());
    std::printf("%s\n", j->dump(2).c_str());
    return 0;
  }
  absl::StatusOr<std::string> table = SchemePresetTable();
  if (!table.ok()) return rep.Fail(table.status());
  std::fputs(table->c_str(), stdout);
  return 0;
}

}  // namespace cact::quant_tool
