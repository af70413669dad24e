// What the Needle 2 and Needle 3 tensor tables (tensor_table.cc, tensor_table3.cc) build
// alike: a directory in order, and the entries both generations share with the same names
// and shapes (the mHC coefficients after the layers, the records of one engram site).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "formats/needle/tensor_table.h"

namespace cact {

inline constexpr uint32_t kMhcTensors = 9;      // a_pre/post/res, b_pre/post/res, phi_pre/post/res
inline constexpr uint32_t kPerSiteTensors = 4;  // tables, key_proj, value_proj, taps

// Appends specs in directory order.
class TensorList {
 public:
  explicit TensorList(size_t expected) { specs_.reserve(expected); }
  void Add(std::string name, TensorKind kind, std::vector<uint32_t> shape) {
    specs_.push_back({std::move(name), kind, std::move(shape)});
  }
  void Matrix(std::string name, uint32_t rows, uint32_t cols) {
    Add(std::move(name), TensorKind::kMatrix, {rows, cols});
  }
  void Vector(std::string name, std::vector<uint32_t> shape) {
    Add(std::move(name), TensorKind::kVector, std::move(shape));
  }
  // mhc_{a_pre, a_post, a_res} [L], mhc_{b_pre, b_post} [L, m], mhc_b_res [L, m, m],
  // mhc_phi_{pre, post} [L*m, m*d], mhc_phi_res [L*m*m, m*d].
  void Mhc(uint32_t layers, uint32_t lanes, uint32_t d_model);
  // engramS.{tables [tables*slots, sub_dim], key_proj and value_proj [d, tables*sub_dim],
  // taps [conv_taps, d]}.
  void EngramSite(uint32_t site, uint32_t tables, uint32_t slots, uint32_t sub_dim,
                  uint32_t d_model, uint32_t conv_taps);
  std::vector<TensorSpec> Take() { return std::move(specs_); }

 private:
  std::vector<TensorSpec> specs_;
};

}  // namespace cact
