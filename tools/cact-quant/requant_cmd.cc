
#include "quant/requant.h"
#include "tools/cact-quant/commands.h"

namespace cact::quant_tool {

int RunRequant(const Options& o) {
  Reporter rep(o);
  PhaseTimer timer;
  absl::StatusOr<std::optional<Scheme>> scheme = ChosenScheme(o);
  if (!scheme.ok()) return rep.Fail(scheme.status());
  if (!*scheme)
    return rep.Fail(absl::InvalidArgumentError("give the new widths: --scheme S or --preset NAME"));
  absl::StatusOr<CactFile> in = OpenFiniteCact(o.input);
  if (!in.ok()) return rep.Fail(in.status());
  if (absl::Status s = CheckKvWindow(o, in->geometry().max_seq_len); !s.ok()) return rep.Fail(s);
  RequantRequest req;
  req.input = &*in;
  req.scheme = **scheme;
  req.kv_window = o.kv_window.value_or(0);
  rep.Configure(&req);
  RebuildReport report = rep.StartRebuild("requant", &timer);
  const absl::StatusOr<CactContents> contents = RequantCact(req, &report, rep.Progress());
  report.scheme_source = SchemeSource(o);
  return rep.Complete(contents, &report, &timer);
}

}  // namespace cact::quant_tool
