#include <cstdio>

#include "absl/strings/str_format.h"
#include "quant/import/flax_checkpoint.h"
#include "tools/cact-quant/commands.h"

namespace cact::quant_tool {

int RunConvert(const Options& o) {
  Reporter rep(o);
  PhaseTimer timer;
  if (!o.dtype.empty() && o.dtype != "F32" && o.dtype != "F16" && o.dtype != "BF16")
    return rep.Fail(absl::InvalidArgumentError("--dtype " + o.dtype + " is not F32, F16 or BF16"));
  if (o.scale && o.lora_adapter.empty())
    return rep.Fail(absl::InvalidArgumentError("--scale needs --lora"));
  ReserveForWeightsIn(o.input);
  absl::StatusOr<CheckpointBuild> c = LoadCheckpointForBuild(o.input, o.lora_adapter, o.scale);
  if (!c.ok()) return rep.Fail(c.status());
  const Safetensors& w = c->canonical.weights;
  // A float16 checkpoint stays float16 (exact, half the size); anything else is float32.
  const std::string dtype = !o.dtype.empty()                  ? o.dtype
                            : c->canonical.dtype == "float16" ? "F16"
                                                              : "F32";
  if (!o.dry_run) {
    if (absl::Status s = WriteSafetensors(o.output, w, dtype); !s.ok()) return rep.Fail(s);
  }
  const double seconds = timer.Total();
  uint64_t params = 0;
  for (const FloatTensor& t : w.tensors) params += t.data.size();
  const bool lossy = (dtype == "BF16") || (dtype == "F16" && c->canonical.dtype != "float16");
  if (o.json) {
    nlohmann::ordered_json j{{"command", "convert"},
                             {"input", o.input},
                             {"lora", o.lora_adapter},
                             {"output", o.output},
                             {"dry_run", o.dry_run},
                             {"checkpoint_dtype", c->canonical.dtype},
                             {"dtype", dtype},
                             {"exact", !lossy},
                             {"tensors", w.tensors.size()},
                             {"params", params},
                             {"bits_map", c->scheme.ToString()},
                             {"kv_window_header", c->geometry.kv_window},
                             {"notes", c->notes},
                             {"seconds", seconds}};
    std::printf("%s\n", j.dump(1).c_str());
    return 0;
  }
  std::printf(
      "convert%s: %s -> %s\n  tensors         %zu (%llu parameters), %s checkpoint written as %s%s\n"
      "  scheme          %s (%s)\n  kv_window       %u (the exporter's window for this config)\n",
      o.dry_run ? " (dry run, nothing written)" : "", o.input.c_str(), o.output.c_str(),
      w.tensors.size(), (unsigned long long)params,
      c->canonical.dtype.c_str(), dtype.c_str(), lossy ? " (rounded: not exact)" : " (exact)",
      c->scheme.ToString().c_str(), c->scheme_source.c_str(), c->geometry.kv_window);
  for (const std::string& n : c->notes) std::printf("  note            %s\n", n.c_str());
  std::printf("  time            %.3f s\n", seconds);
  return 0;
}

}  // namespace cact::quant_tool
