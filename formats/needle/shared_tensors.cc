#include "formats/needle/shared_tensors.h"

#include "absl/strings/str_format.h"

namespace cact {

void TensorList::Mhc(uint32_t L, uint32_t m, uint32_t d) {
  for (const char* name : {"mhc_a_pre", "mhc_a_post", "mhc_a_res"}) Vector(name, {L});
  Vector("mhc_b_pre", {L, m});
  Vector("mhc_b_post", {L, m});
  Vector("mhc_b_res", {L, m, m});
  Matrix("mhc_phi_pre", L * m, m * d);
  Matrix("mhc_phi_post", L * m, m * d);
  Matrix("mhc_phi_res", L * m * m, m * d);
}

void TensorList::EngramSite(uint32_t site, uint32_t T, uint32_t slots, uint32_t s, uint32_t d,
                            uint32_t conv_taps) {
  const std::string p = absl::StrFormat("engram%d.", site);
  Matrix(p + "tables", T * slots, s);
  Matrix(p + "key_proj", d, T * s);
  Matrix(p + "value_proj", d, T * s);
  Vector(p + "taps", {conv_taps, d});
}

}  // namespace cact
