#include "quant/selective.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_format.h"

namespace cact {

KeepDecision DecideKeep(std::span<const float> values, std::span<const float> base,
                        KeepPolicy policy, double tolerance) {
  KeepDecision d;
  bool bitwise = values.size() == base.size();
  for (size_t i = 0; i < values.size() && i < base.size(); ++i) {
    d.max_abs_base = std::max(d.max_abs_base, std::fabs(double(base[i])));
    d.max_abs_diff = std::max(d.max_abs_diff, std::fabs(double(values[i]) - double(base[i])));
    bitwise = bitwise && std::memcmp(&values[i], &base[i], sizeof(float)) == 0;
  }
  const double bound = tolerance * d.max_abs_base;
  switch (policy) {
    case KeepPolicy::kNever:
      d.reason = "--force-requantize";
      return d;
    case KeepPolicy::kExact:
      d.keep = bitwise;
      d.reason = bitwise ? "= base (bitwise)"
                         : absl::StrFormat("values differ from base (max |d| %.3g, --exact)",
                                           d.max_abs_diff);
      return d;
    case KeepPolicy::kTolerance:
      d.keep = values.size() == base.size() && (bitwise || d.max_abs_diff <= bound);
      d.reason =
          d.keep ? (bitwise ? std::string("= base (bitwise)")
                            : absl::StrFormat("= base (max |d| %.3g <= %.0e x max |w| %.3g)",
                                              d.max_abs_diff, tolerance, d.max_abs_base))
                 : absl::StrFormat("values differ from base (max |d| %.3g > %.0e x max |w| %.3g)",
                                   d.max_abs_diff, tolerance, d.max_abs_base);
      return d;
  }
  return d;
}

}  // namespace cact
