#include <cstdio>

#include "absl/strings/str_format.h"
#include "quant/build.h"
#include "tools/cact-quant/commands.h"
#include "tools/common/exit_code.h"

namespace cact::quant_tool {

double PhaseTimer::CpuLap() {
  const double now = ProcessCpuSeconds(), d = now - last_cpu_;
  last_cpu_ = now;
  return d;
}

void Reporter::Tensor(size_t index, size_t total, const TensorOutcome& t) const {
  if (o_.json || o_.quiet) return;
  const int width = int(std::to_string(total).size());
  std::fprintf(stderr, "[%*zu/%zu] %s\n", width, index, total, ProgressLine(t).c_str());
}

RebuildReport Reporter::StartRebuild(const char* command, PhaseTimer* timer) const {
  RebuildReport report;
  report.command = command;
  report.read_seconds = timer->Lap();
  timer->CpuLap();
  return report;
}

int Reporter::Finish(const RebuildReport& r) const {
  if (o_.json) {
    std::printf("%s\n", ReportJson(r).dump(1).c_str());
  } else {
    std::printf("%s", SummaryText(r).c_str());
  }
  return 0;
}

int Reporter::Complete(const absl::StatusOr<CactContents>& contents, RebuildReport* report,
                       PhaseTimer* timer) const {
  if (!contents.ok()) return Fail(contents.status());
  if (absl::Status s = CheckKvWindow(o_, contents->geometry.max_seq_len); !s.ok()) return Fail(s);
  report->work_seconds = timer->Lap();
  report->work_cpu_seconds = timer->CpuLap();
  if (absl::Status st = FinishRebuild(*contents, o_.output, o_.zstd_level, report); !st.ok())
    return Fail(st);
  report->write_seconds = timer->Lap();
  report->seconds = timer->Total();
  return Finish(*report);
}

int Reporter::Fail(const absl::Status& st) const {
  return cact::tools::ReportFailure("cact-quant", st);
}

}  // namespace cact::quant_tool
