#include "quant/cq/reencode.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/cq/fp16.h"
#include "quant/cq/fwht.h"

namespace cact {
namespace {

constexpr int kFitRounds = 8;  // code/norm alternations (they settle in 1-3)
constexpr int kPadRounds = 3;  // refits of a padded group's free columns

// The exporter's nearest entry (searchsorted, ties to the smaller index).
uint8_t Nearest(float v, std::span<const float> cb) {
  const int n = int(cb.size());
  int pos = 0;
  for (int k = 0; k < n; ++k) pos += cb[k] < v;
  pos = std::clamp(pos, 1, n - 1);
  return uint8_t(std::fabs(v - cb[pos - 1]) <= std::fabs(v - cb[pos]) ? pos - 1 : pos);
}

float Entry(std::span<const float> cb, uint8_t c) { return c < cb.size() ? cb[c] : 0.0f; }

struct Fit {
  std::vector<uint8_t> codes;
  uint16_t norm = 0;
  double err = INFINITY;  // |r - norm * cb[codes]|^2 (rotated domain)
};

double FitError(const float* r, uint32_t g, std::span<const float> cb, const uint8_t* codes,
                float norm) {
  double e = 0;
  for (uint32_t j = 0; j < g; ++j) {
    const double d = double(r[j]) - double(Entry(cb, codes[j])) * norm;
    e += d * d;
  }
  return e;
}

// Alternates least-squares norm and nearest codes from `codes`; the best FP16 pair seen.
Fit Alternate(const float* r, uint32_t g, std::span<const float> cb, std::vector<uint8_t> codes) {
  Fit best;
  for (int round = 0; round < kFitRounds; ++round) {
    double num = 0, den = 0;
    for (uint32_t j = 0; j < g; ++j) {
      const double c = Entry(cb, codes[j]);
      num += double(r[j]) * c;
      den += c * c;
    }
    const double n = den > 0 ? num / den : 0.0;
    if (!(n > 0) || !std::isfinite(n)) break;
    const uint16_t half = FloatToHalf(float(n));
    const float stored = HalfToFloat(half);
    if (!(stored > 0) || !std::isfinite(stored)) break;
    const double err = FitError(r, g, cb, codes.data(), stored);
    if (!(err < best.err)) break;
    best = Fit{codes, half, err};
    const float inv = float(1.0 / n);
    bool changed = false;
    for (uint32_t j = 0; j < g; ++j) {
      const uint8_t c = Nearest(r[j] * inv, cb);
      changed |= c != codes[j];
      codes[j] = c;
    }
    if (!changed) break;
  }
  return best;
}

struct GroupInput {
  const float* edited;     // the group's real columns
  uint32_t valid;          // real columns (< g when the row is padded)
  const uint8_t* exporter_codes;  // the exporter's encoding of the edited values
  uint16_t exporter_norm;
  uint16_t base_norm;
  const uint8_t* base_codes;
  const float* base_padding;  // g - valid dequantized padding values of the base group
};

// Squared error of a fit over the group's real columns.
double ValidError(const GroupInput& in, const Fit& fit, uint32_t g, std::span<const float> cb,
                  std::vector<float>& y) {
  const float n = HalfToFloat(fit.norm);
  for (uint32_t j = 0; j < g; ++j) y[j] = Entry(cb, fit.codes[j]) * n;
  FwhtOrthonormal(y.data(), g);
  double e = 0;
  for (uint32_t j = 0; j < in.valid; ++j) {
    const double d = double(y[j]) - in.edited[j];
    e += d * d;
  }
  return e;
}

// Fits from the padding `pad` (empty for a full group): both starts, then, for a padded
// group, the padding takes what the fit puts there and the fit is redone while the real
// columns' error falls. Returns no codes when no positive norm fits (an all-zero group).
Fit FitFromPadding(const GroupInput& in, std::vector<float> pad, uint32_t g,
                   std::span<const float> cb, std::vector<float>& x, std::vector<float>& y,
                   double* valid_err) {
  Fit best;
  *valid_err = INFINITY;
  for (int round = 0; round < (in.valid < g ? kPadRounds : 1); ++round) {
    std::copy(in.edited, in.edited + in.valid, x.begin());
    std::copy(pad.begin(), pad.end(), x.begin() + in.valid);
    FwhtOrthonormal(x.data(), g);
    Fit fit;
    const float base_norm = HalfToFloat(in.base_norm);
    if (base_norm > 0 && std::isfinite(base_norm)) {
      std::vector<uint8_t> start(g);
      const float inv = 1.0f / base_norm;
      for (uint32_t j = 0; j < g; ++j) start[j] = Nearest(x[j] * inv, cb);
      fit = Alternate(x.data(), g, cb, std::move(start));
    }
    Fit other = Alternate(x.data(), g, cb, {in.exporter_codes, in.exporter_codes + g});
    if (other.err < fit.err) fit = std::move(other);
    if (fit.codes.empty()) break;
    const double e = ValidError(in, fit, g, cb, y);
    if (!(e < *valid_err)) break;
    *valid_err = e;
    best = fit;
    pad.assign(y.begin() + in.valid, y.begin() + g);  // y: this fit, rotated back
  }
  return best;
}

// The fitted encoding of one group (see the header): the best, on the real columns, of the
// fit from the base's padding, from zero padding (a padded group) and the exporter's own
// encoding, in that order of preference on a tie.
Fit FitGroup(const GroupInput& in, uint32_t g, std::span<const float> cb, std::vector<float>& x,
             std::vector<float>& y) {
  double err = INFINITY;
  Fit best =
      FitFromPadding(in, {in.base_padding, in.base_padding + (g - in.valid)}, g, cb, x, y, &err);
  if (best.codes.empty()) {  // nothing fits a positive norm: norm 0, the base's codes
    best.codes.assign(in.base_codes, in.base_codes + g);
    best.norm = 0;
    err = ValidError(in, best, g, cb, y);
  }
  if (in.valid < g) {
    double zero_err;
    Fit zero = FitFromPadding(in, std::vector<float>(g - in.valid, 0.0f), g, cb, x, y, &zero_err);
    if (!zero.codes.empty() && zero_err < err) best = std::move(zero), err = zero_err;
  }
  Fit exporter{{in.exporter_codes, in.exporter_codes + g}, in.exporter_norm, 0};
  if (ValidError(in, exporter, g, cb, y) < err) best = std::move(exporter);
  return best;
}

double SquaredNorm(const float* a, uint32_t n) {
  double s = 0;
  for (uint32_t i = 0; i < n; ++i) s += double(a[i]) * a[i];
  return s;
}

// The exporter's relative error |w - Q(w)| / |w| on a typical group: the rotated unit
// group's coordinates are ~N(0, 1/g), so this is the codebook's RMS error on N(0, 1) after
// scaling by sqrt(g) (numerical integration; 0.343 for 2 bits, 0.186 for 3, 0.097 for 4).
double TypicalRelativeError(std::span<const float> cb, uint32_t g) {
  const double scale = std::sqrt(double(g));
  constexpr int kSteps = 8000;
  constexpr double kRange = 8.0, kDz = 2 * kRange / kSteps;
  double mse = 0;
  for (int i = 0; i <= kSteps; ++i) {
    const double z = -kRange + i * kDz;
    double best = INFINITY;
    for (float c : cb) best = std::min(best, std::fabs(z - c * scale));
    mse += best * best * std::exp(-0.5 * z * z) * kDz;
  }
  return std::sqrt(mse / std::sqrt(2 * M_PI));
}

double SquaredDistance(const float* a, const float* b, uint32_t n) {
  double s = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const double d = double(a[i]) - b[i];
    s += d * d;
  }
  return s;
}

}  // namespace

ReencodeResult ReencodeMatrix(std::span<const uint8_t> base_blob, const CqShape& shape,
                              std::span<const float> codebook, const float* edited,
                              const float* base_values, const ReencodeOptions& options) {
  const uint32_t g = shape.group, groups = shape.groups(), in_pad = shape.in_pad();
  const uint64_t n = uint64_t(shape.out) * shape.in;
  const CqMatrix base = UnpackBlob(base_blob, shape);
  const CqMatrix exporter = QuantizeMatrix(edited, shape, codebook, options.rotation);
  double max_base = 0;
  for (uint64_t i = 0; i < n; ++i) max_base = std::max(max_base, std::fabs(double(base_values[i])));
  const double keep_bound = options.keep_tolerance * max_base;
  // (half the exporter's typical relative error)^2
  const double far_sq =
      options.quantize_far_groups ? 0.25 * std::pow(TypicalRelativeError(codebook, g), 2) : 0.0;

  CqMatrix out;
  out.shape = shape;
  out.codes.resize(uint64_t(shape.out) * in_pad);
  out.norms.resize(uint64_t(shape.out) * groups);
  uint64_t kept = 0, reencoded = 0, quantized = 0;
#pragma omp parallel reduction(+ : kept, reencoded, quantized)
  {
    std::vector<float> x(g), y(g), base_padding;
#pragma omp for schedule(dynamic, 4)
    for (int64_t row = 0; row < int64_t(shape.out); ++row) {
      for (uint32_t gi = 0; gi < groups; ++gi) {
        const uint64_t q = uint64_t(row) * groups + gi;
        const uint64_t col0 = uint64_t(gi) * g;
        const uint32_t valid = std::min<uint32_t>(g, shape.in - uint32_t(col0));
        const float* e = edited + uint64_t(row) * shape.in + col0;
        const float* b = base_values + uint64_t(row) * shape.in + col0;
        uint8_t* codes = out.codes.data() + q * g;
        const uint8_t* base_codes = base.codes.data() + q * g;
        const uint8_t* exporter_codes = exporter.codes.data() + q * g;
        double max_diff = 0;
        for (uint32_t j = 0; j < valid; ++j)
          max_diff = std::max(max_diff, std::fabs(double(e[j]) - double(b[j])));
        if (options.keep_tolerance >= 0 && max_diff <= keep_bound) {
          std::copy(base_codes, base_codes + g, codes);
          out.norms[q] = base.norms[q];
          ++kept;
          continue;
        }
        if (options.quantize_far_groups) {
          // New values: those the exporter's rule maps onto the base's own bytes (the
          // weights the base was built from), or further from the base than half the rule's
          // typical error at this width.
          const bool exporter_gives_base =
              exporter.norms[q] == base.norms[q] &&
              std::equal(exporter_codes, exporter_codes + g, base_codes);
          if (exporter_gives_base || SquaredDistance(b, e, valid) > far_sq * SquaredNorm(e, valid)) {
            std::copy(exporter_codes, exporter_codes + g, codes);
            out.norms[q] = exporter.norms[q];
            ++quantized;
            continue;
          }
        }
        // A padded row: the base group's padding columns start the fit.
        base_padding.clear();
        if (valid < g) {
          const float base_norm = HalfToFloat(base.norms[q]);
          for (uint32_t j = 0; j < g; ++j) y[j] = Entry(codebook, base_codes[j]) * base_norm;
          FwhtOrthonormal(y.data(), g);
          base_padding.assign(y.begin() + valid, y.end());
        }
        const GroupInput input{e,
                               valid,
                               exporter_codes,
                               exporter.norms[q],
                               base.norms[q],
                               base_codes,
                               base_padding.data()};
        Fit fit = FitGroup(input, g, codebook, x, y);
        std::copy(fit.codes.begin(), fit.codes.end(), codes);
        out.norms[q] = fit.norm;
        ++reencoded;
      }
    }
  }

  ReencodeResult r;
  r.kept = kept;
  r.reencoded = reencoded;
  r.quantized = quantized;
  r.blob = PackBlob(out);
  r.values.resize(n);
  DequantizeBlob(r.blob, shape, codebook, r.values.data());
  double edit = 0, moved = 0, error = 0, signal = 0, base_sq = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const double d = double(edited[i]) - base_values[i], m = double(r.values[i]) - base_values[i],
                 err = double(r.values[i]) - edited[i];
    edit += d * d;
    moved += m * m;
    error += err * err;
    signal += double(edited[i]) * edited[i];
    base_sq += double(base_values[i]) * base_values[i];
  }
  r.base_norm = std::sqrt(base_sq);
  r.edit_norm = std::sqrt(edit);
  r.moved_norm = std::sqrt(moved);
  r.error_norm = std::sqrt(error);
  r.rel_mse = signal > 0 ? error / signal : 0.0;
  return r;
}

}  // namespace cact
