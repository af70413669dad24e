
#include "quant/requant.h"
#include "tools/cact-quant/commands.h"

namespace cact::quant_tool {

int RunRequant(const Options& o) {
  Reporter rep(o);
  PhaseTimer timer;
  absl::StatusOr<Scheme> scheme = ParseScheme(o.scheme);
  if (!scheme.ok()) return rep.Fail(scheme.status());
  absl::StatusOr<CactFile> in = CactFile::Open(o.input);
  if (!in.ok()) return rep.Fail(in.status());
  RequantRequest req;
  req.input = &*in;
  req.scheme = *scheme;
  req.kv_window = o.kv_window;
  req.rotation = o.exporter_rotation ? CqRotation::kExporter : CqRotation::kFwht;
  req.dry_run = o.dry_run;
  RebuildReport report;
  report.command = "requant";
  report.read_seconds = timer.Lap();
  timer.CpuLap();
  absl::StatusOr<CactContents> contents =
      RequantCact(req, &report, [&](size_t i, size_t n, const TensorOutcome& t) { rep.Tensor(i, n, t); });
  return rep.Complete(contents, &report, &timer);
}

}  // namespace cact::quant_tool
