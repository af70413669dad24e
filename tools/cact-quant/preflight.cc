// Checks on the paths, inputs and header values a command was given, made before any work.
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "formats/cact/finite_check.h"
#include "lib/file_identity.h"
#include "quant/import/lora.h"
#include "tools/cact-quant/commands.h"

namespace cact::quant_tool {

absl::Status CheckOutputsAreNotInputs(const Options& o) {
  std::vector<std::string> inputs;
  for (const std::string* p : {&o.weights, &o.checkpoint, &o.lora_adapter, &o.base, &o.tokenizer,
                               &o.config, &o.input, &o.adapter, &o.adapter_config})
    if (!p->empty()) inputs.push_back(*p);
  // The files inside a PEFT adapter directory are the inputs there.
  if (!o.adapter.empty()) {
    absl::StatusOr<LoraAdapterFiles> files = FindLoraAdapterFiles(o.adapter, o.adapter_config);
    if (files.ok()) {
      inputs.push_back(files->weights);
      if (!files->config.empty()) inputs.push_back(files->config);
    }
  }
  if (!o.output.empty()) {
    if (absl::Status s = CheckOutputIsNotInput(o.output, inputs, "-o"); !s.ok()) return s;
  }
  if (!o.weights_out.empty()) {
    if (absl::Status s = CheckOutputIsNotInput(o.weights_out, inputs, "--weights-out"); !s.ok())
      return s;
    if (!o.output.empty()) {
      inputs = {o.output};
      if (absl::Status s = CheckOutputIsNotInput(o.weights_out, inputs, "--weights-out");
          !s.ok() || o.weights_out == o.output)
        return absl::InvalidArgumentError("--weights-out and -o name the same file (" +
                                          o.output + ")");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckKvWindow(const Options& o, uint32_t max_seq_len) {
  if (!o.kv_window || *o.kv_window <= max_seq_len) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("--kv-window %d is more than the model's max_seq_len %d (a window cannot "
                      "hold more positions than the model has)",
                      *o.kv_window, max_seq_len));
}

absl::StatusOr<CactFile> OpenFiniteCact(const std::string& path) {
  absl::StatusOr<CactFile> file = CactFile::Open(path);
  if (file.ok()) {
    if (absl::Status s = CheckFinite(*file); !s.ok()) return s;
  }
  return file;
}

}  // namespace cact::quant_tool
