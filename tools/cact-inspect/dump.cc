// cact-inspect dump: one tensor's values (CQ dequantized with the file's codebook) as .npy
// in its logical shape.
#include <cstdio>

#include "formats/cact/cact_file.h"
#include "lib/npy.h"
#include "quant/tensor_values.h"
#include "tools/cact-inspect/commands.h"

namespace cact::inspect {

int RunDump(const Options& o) {
  auto file = CactFile::Open(o.file);
  if (!file.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(file.status().message()).c_str());
    return 2;
  }
  const TensorEntry* t = file->Find(o.tensor);
  if (!t) {
    std::fprintf(stderr, "error: %s: no tensor named '%s' (see `cact-inspect %s` for the names)\n",
                 o.file.c_str(), o.tensor.c_str(), o.file.c_str());
    return 2;
  }
  auto values = TensorValues(*file, *t);
  if (!values.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(values.status().message()).c_str());
    return 2;
  }
  const std::vector<uint32_t> dims = t->shape();
  std::vector<size_t> shape(dims.begin(), dims.end());
  if (auto st = WriteNpy(o.output, values->data(), shape); !st.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(st.message()).c_str());
    return 2;
  }
  std::fprintf(stderr, "wrote %s: %s float32 %zu values\n", o.output.c_str(), t->name.c_str(), values->size());
  return 0;
}

}  // namespace cact::inspect
