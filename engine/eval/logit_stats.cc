#include "engine/eval/logit_stats.h"

#include <algorithm>
#include <cmath>

#include "engine/kernels/fast_ops.h"

namespace cact {

LogitRow SummarizeLogits(std::span<const float> logits, std::vector<float>& exp_scratch) {
  LogitRow row;
  if (logits.empty()) return row;
  row.max = logits[0];
  for (uint32_t i = 1; i < logits.size(); ++i)
    if (logits[i] > row.max) {
      row.max = logits[i];
      row.argmax = i;
    }
  exp_scratch.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) exp_scratch[i] = logits[i] - row.max;
  kernels::ExpInPlace(exp_scratch.data(), exp_scratch.size());
  // Eight partial double sums: the loop vectorises, and no term is rounded to float.
  double part[8] = {};
  size_t i = 0;
  for (; i + 8 <= exp_scratch.size(); i += 8)
    for (int j = 0; j < 8; ++j) part[j] += exp_scratch[i + j];
  for (; i < exp_scratch.size(); ++i) part[0] += exp_scratch[i];
  const double sum =
      ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
  row.log_sum_shift = std::log(sum);
  row.log_sum_exp = double(row.max) + row.log_sum_shift;
  return row;
}

double KlDivergenceFromRows(std::span<const float> p, const LogitRow& p_row,
                            std::span<const float> p_exp, std::span<const float> q,
                            const LogitRow& q_row) {
  double weighted[8] = {};
  const size_t n = std::min({p.size(), q.size(), p_exp.size()});
  const double pm = p_row.max, qm = q_row.max;
  auto d = [&](size_t i) { return (double(p[i]) - pm) - (double(q[i]) - qm); };
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) weighted[j] += double(p_exp[i + j]) * d(i + j);
  for (; i < n; ++i) weighted[0] += double(p_exp[i]) * d(i);
  double w = 0;
  for (int j = 0; j < 8; ++j) w += weighted[j];
  // sum_i P_i d_i with P_i = exp_i / sum_j exp_j; then the two normalisers.
  const double kl =
      w / std::exp(p_row.log_sum_shift) - p_row.log_sum_shift + q_row.log_sum_shift;
  return std::max(kl, 0.0);
}

}  // namespace cact
