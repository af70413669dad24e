#include <cstdio>

#include "absl/strings/str_format.h"
#include "quant/dequant_export.h"
#include "tools/cact-quant/commands.h"

namespace cact::quant_tool {

int RunDequant(const Options& o) {
  Reporter rep(o);
  PhaseTimer timer;
  const std::string& dtype = o.dequant_dtype;
  if (dtype != "F32" && dtype != "F16" && dtype != "BF16")
    return rep.Fail(absl::InvalidArgumentError("--dtype " + dtype + " is not F32, F16 or BF16"));
  absl::StatusOr<CactFile> in = OpenFiniteCact(o.input);
  if (!in.ok()) return rep.Fail(in.status());
  absl::StatusOr<Safetensors> st = DequantizedWeights(*in);
  if (!st.ok()) return rep.Fail(st.status());
  if (!o.dry_run) {
    if (absl::Status s = WriteSafetensors(o.output, *st, dtype); !s.ok()) return rep.Fail(s);
  }
  const double seconds = timer.Total();
  uint64_t params = 0;
  for (const FloatTensor& t : st->tensors) params += t.data.size();
  if (o.json) {
    nlohmann::ordered_json j{{"command", "dequant"},
                             {"input", o.input},
                             {"output", o.output},
                             {"dry_run", o.dry_run},
                             {"dtype", dtype},
                             {"tensors", st->tensors.size()},
                             {"params", params},
                             {"bits_map", st->metadata["bits_map"]},
                             {"seconds", seconds}};
    std::printf("%s\n", j.dump(1).c_str());
  } else {
    std::printf(
        "dequant%s: %s -> %s\n  tensors         %zu (%llu parameters) as %s\n  scheme          %s\n"
        "  time            %.3f s\n",
        o.dry_run ? " (dry run, nothing written)" : "", o.input.c_str(), o.output.c_str(),
        st->tensors.size(), (unsigned long long)params,
        dtype.c_str(), st->metadata["bits_map"].c_str(), seconds);
    if (dtype != "F32")
      std::printf(
          "  note            %s loses precision: `build --base` will not recognise the values as "
          "unchanged\n",
          dtype.c_str());
  }
  return 0;
}

}  // namespace cact::quant_tool
