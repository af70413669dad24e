// cact-inspect dump: one tensor's values (CQ dequantized with the file's codebook) as .npy
// in its logical shape.
#include <cmath>
#include <cstdio>

#include "absl/strings/str_format.h"
#include "formats/cact/any_generation.h"
#include "formats/cact/cact_file.h"
#include "lib/file_identity.h"
#include "lib/npy.h"
#include "quant/tensor_values.h"
#include "tools/cact-inspect/commands.h"

namespace cact::inspect {

int RunDump(const Options& o) {
  if (absl::Status st = CheckOutputIsNotInput(o.output, {o.file}, "-o"); !st.ok()) return Fail(st);
  auto opened = OpenAnyGeneration(o.file);
  if (!opened.ok()) return Fail(opened.status());
  const CactFile* file = &opened->records();  // the same CQ dequantizer for both generations
  const TensorEntry* t = file->Find(o.tensor);
  if (!t) {
    return Fail(absl::NotFoundError(o.file + ": no tensor named '" + o.tensor +
                                    "' (see `cact-inspect " + o.file + "` for the names)"));
  }
  auto values = TensorValues(*file, *t);
  if (!values.ok()) return Fail(values.status());
  // No writer emits a non-finite value; verify locates it in the file.
  for (size_t i = 0; i < values->size(); ++i)
    if (!std::isfinite((*values)[i]))
      return Fail(absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor '%s' element %d is %g; refusing to write a non-finite value "
          "(`cact-inspect verify %s` locates it in the file)",
          o.file, t->name, i, (*values)[i], o.file)));
  const std::vector<uint32_t> dims = t->shape();
  std::vector<size_t> shape(dims.begin(), dims.end());
  if (auto st = WriteNpy(o.output, values->data(), shape); !st.ok()) return Fail(st);
  std::fprintf(stderr, "wrote %s: %s float32 %zu values\n", o.output.c_str(), t->name.c_str(),
               values->size());
  return 0;
}

}  // namespace cact::inspect
