#include "quant/dequant_export.h"

#include "lib/status.h"
#include "quant/scheme_inference.h"
#include "quant/synthetic.h"
#include "quant/tensor_values.h"

namespace cact {

absl::StatusOr<Safetensors> DequantizedWeights(const CactFile& file) {
  Safetensors st;
  for (const TensorEntry& t : file.tensors()) {
    if (t.record.dtype == DType::kRAW) continue;
    FloatTensor ft;
    ft.name = t.name;
    ft.shape = t.shape();
    CACT_ASSIGN_OR_RETURN(ft.data, TensorValues(file, t));
    st.tensors.push_back(std::move(ft));
  }
  st.metadata["config"] = OfficialConfigJson(file.geometry(), file.probe_heads());
  st.metadata["bits_map"] = InferScheme(file);
  st.metadata["group"] = std::to_string(file.codebook_group() ? file.codebook_group() : 128);
  st.metadata["kv_window_header"] = std::to_string(file.geometry().kv_window);
  st.metadata["source"] = file.path() + " (dequantized by cact-quant)";
  return st;
}

}  // namespace cact
