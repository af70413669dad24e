#include <fstream>
#include <sstream>

#include "quant/import/flax_checkpoint.h"
#include "quant/import/lora.h"
#include "tools/cact-quant/commands.h"

namespace cact::quant_tool {

int RunLora(const Options& o) {
  Reporter rep(o);
  PhaseTimer timer;
  absl::StatusOr<CactFile> base = CactFile::Open(o.input);
  if (!base.ok()) return rep.Fail(base.status());
  absl::StatusOr<Safetensors> st = ReadAdapterFile(o.adapter, base->geometry());
  if (!st.ok()) return rep.Fail(st.status());
  std::string config;
  if (!o.adapter_config.empty()) {
    std::ifstream f(o.adapter_config, std::ios::binary);
    if (!f) return rep.Fail(absl::InvalidArgumentError(o.adapter_config + ": cannot open"));
    std::stringstream s;
    s << f.rdbuf();
    config = s.str();
  }
  absl::StatusOr<LoraAdapter> adapter =
      ParseLoraAdapter(*st, o.adapter, config, o.scale, base->geometry());
  if (!adapter.ok()) return rep.Fail(adapter.status());
  LoraRequest req;
  req.base = &*base;
  req.adapter = &*adapter;
  rep.Configure(&req);
  RebuildReport report = rep.StartRebuild("lora", &timer);
  const absl::StatusOr<CactContents> contents = MergeLora(req, &report, rep.Progress());
  return rep.Complete(contents, &report, &timer);
}

}  // namespace cact::quant_tool
