#include <fstream>
#include <limits>
#include <sstream>

#include "quant/import/flax_checkpoint.h"
#include "quant/import/lora.h"
#include "tools/cact-quant/commands.h"

namespace cact::quant_tool {

int RunLora(const Options& o) {
  Reporter rep(o);
  PhaseTimer timer;
  absl::StatusOr<LoraAdapterFiles> files = FindLoraAdapterFiles(o.adapter, o.adapter_config);
  if (!files.ok()) return rep.Fail(files.status());
  absl::StatusOr<CactFile> base = OpenFiniteCact(o.input);
  if (!base.ok()) return rep.Fail(base.status());
  absl::StatusOr<Safetensors> st = ReadAdapterFile(files->weights, base->geometry());
  if (!st.ok()) return rep.Fail(st.status());
  std::string config;
  if (!files->config.empty()) {
    std::ifstream f(files->config, std::ios::binary);
    if (!f) return rep.Fail(absl::InvalidArgumentError(files->config + ": cannot open"));
    std::stringstream s;
    s << f.rdbuf();
    config = s.str();
  }
  absl::StatusOr<LoraAdapter> adapter =
      ParseLoraAdapter(*st, files->weights, config, o.scale, base->geometry());
  if (!adapter.ok()) return rep.Fail(adapter.status());
  // The widths: what the adapter trained through (as `needle build` deploys it; a scheme
  // given against it is refused), else the scheme given, else the base's.
  absl::StatusOr<std::optional<Scheme>> chosen = ChosenScheme(o);
  if (!chosen.ok()) return rep.Fail(chosen.status());
  absl::StatusOr<AdapterQat> qat = AdapterQatOf(*st, files->weights);
  if (!qat.ok()) return rep.Fail(qat.status());
  LoraRequest req;
  if (qat->recorded()) {
    if (*chosen) {
      if (absl::Status s = CheckSchemeAgainstQat(*qat, **chosen, SchemeSource(o)); !s.ok())
        return rep.Fail(s);
    }
    req.scheme = qat->scheme();
    req.scheme_source = qat->source();
  } else if (*chosen) {
    req.scheme = **chosen;
    req.scheme_source = SchemeSource(o);
  }
  req.base = &*base;
  req.adapter = &*adapter;
  req.exporter_rule = o.exporter_rule;
  if (o.allow_large_update) req.max_update_ratio = std::numeric_limits<double>::infinity();
  rep.Configure(&req);
  RebuildReport report = rep.StartRebuild("lora", &timer);
  if (files->config_found && !o.scale)
    report.notes.push_back("adapter config: " + files->config + " (found beside the adapter)");
  const absl::StatusOr<CactContents> contents = MergeLora(req, &report, rep.Progress());
  return rep.Complete(contents, &report, &timer);
}

}  // namespace cact::quant_tool
