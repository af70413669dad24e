// Statistics of one position's logits for scoring text: log-sum-exp, the log-probability of
// a target token, top-1, and KL(P || Q) between two models' distributions. Perplexity runs
// these on every position of every chunk (8,192 logits a row on needle2), so exp is the fast
// path's vectorised float Exp (about 1 ulp) and every sum is accumulated in double: the
// results agree with a float64 numpy log-softmax to ~1e-7 relative.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace cact {

struct LogitRow {
  float max = 0;
  uint32_t argmax = 0;       // first index of the largest logit (numpy argmax)
  double log_sum_shift = 0;  // log(sum_i exp(x_i - max))
  double log_sum_exp = 0;    // log(sum_i exp(x_i)) = max + log_sum_shift
};

// Summarises `logits`; leaves exp(x_i - max) in `exp_scratch` (resized to the row) for
// KlDivergenceFromRows.
LogitRow SummarizeLogits(std::span<const float> logits, std::vector<float>& exp_scratch);

// log P(target) = x_target - log_sum_exp.
inline double LogProb(std::span<const float> logits, const LogitRow& row, uint32_t target) {
  return double(logits[target]) - row.log_sum_exp;
}

// KL(softmax(p) || softmax(q)) = sum_i P_i d_i - log_sum_shift(p) + log_sum_shift(q) with
// d_i = (p_i - max p) - (q_i - max q), so a constant offset between the rows cancels exactly
// (equal rows give 0). P_i comes from `p_exp` (SummarizeLogits(p)'s scratch). The float
// exp's rounding leaves an absolute error of up to ~1e-8 nats (tests: against std::exp in
// double), far below any divergence worth reading; a negative result is clamped at 0.
double KlDivergenceFromRows(std::span<const float> p, const LogitRow& p_row,
                            std::span<const float> p_exp, std::span<const float> q,
                            const LogitRow& q_row);

}  // namespace cact
