#include "tools/cact-run/kld_histogram.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "absl/strings/str_format.h"

namespace cact {

std::string KldHistogramSvg(const CompareReport& r) {
  constexpr double W = 720, H = 440, L = 70, R = 30, T = 76, B = 56;
  constexpr int kBinsPerDecade = 8;
  // Decades from the smallest positive KLD (at most 8 below the largest) to the largest;
  // exact zeros (and anything below the range) get a bar of their own at the left.
  double lo_v = 0, hi_v = 0;
  for (const TokenComparison& t : r.tokens)
    if (t.kld > 0) {
      lo_v = lo_v == 0 ? t.kld : std::min(lo_v, t.kld);
      hi_v = std::max(hi_v, t.kld);
    }
  const int hi = hi_v > 0 ? int(std::ceil(std::log10(hi_v))) : 0;
  const int lo = hi_v > 0 ? std::max(int(std::floor(std::log10(lo_v))), hi - 8) : -1;
  const int bins = std::max(1, (hi - lo) * kBinsPerDecade);
  std::vector<size_t> count(size_t(bins) + 1, 0);  // [0]: zero / below range
  for (const TokenComparison& t : r.tokens) {
    if (t.kld <= 0 || std::log10(t.kld) < lo) {
      ++count[0];
      continue;
    }
    const int b = int((std::log10(t.kld) - lo) * kBinsPerDecade);
    ++count[size_t(std::clamp(b, 0, bins - 1)) + 1];
  }
  const size_t peak = std::max<size_t>(1, *std::max_element(count.begin(), count.end()));

  const double zero_w = (W - L - R) / double(bins + 2);  // the zero bar and a gap
  const double x0 = L + std::max(3 * zero_w, 36.0);
  auto X = [&](double log_v) { return x0 + (W - R - x0) * (log_v - lo) / double(hi - lo); };
  auto Y = [&](double c) { return H - B - (H - T - B) * c / double(peak); };

  std::string s = absl::StrFormat(
      "<svg xmlns='http://www.w3.org/2000/svg' width='%g' height='%g' font-family='sans-serif' "
      "font-size='12'>\n<rect width='100%%' height='100%%' fill='white'/>\n",
      W, H);
  s += absl::StrFormat(
      "<text x='%g' y='20' font-size='14'>KL(base || other) per scored token: %s vs %s</text>\n",
      L, std::filesystem::path(r.base_path).filename().string(),
      std::filesystem::path(r.other_path).filename().string());
  s += absl::StrFormat(
      "<text x='%g' y='38' fill='#555'>%d tokens, %s path, ctx %d, window %d; same top-1 "
      "%.2f %%; max %.3g nats</text>\n",
      L, r.tokens.size(), r.run.path_name, r.run.ctx, r.run.window,
      100 * r.top1_agreement.mean, r.kld_q.max);
  // Axes, count ticks, decade ticks.
  s += absl::StrFormat("<line x1='%g' y1='%g' x2='%g' y2='%g' stroke='black'/>\n", L, H - B,
                       W - R, H - B);
  s += absl::StrFormat("<line x1='%g' y1='%g' x2='%g' y2='%g' stroke='black'/>\n", L, T, L,
                       H - B);
  // Count ticks every 1, 2 or 5 x 10^k, four or more of them.
  double step = std::pow(10.0, std::floor(std::log10(std::max(1.0, double(peak) / 4))));
  for (double m : {2.0, 5.0, 10.0})
    if (double(peak) / step > 8) step = std::pow(10.0, std::floor(std::log10(step))) * m;
  step = std::max(1.0, step);
  for (double c = 0; c <= double(peak); c += step)
    s += absl::StrFormat(
        "<line x1='%g' y1='%g' x2='%g' y2='%g' stroke='#ddd'/>\n<text x='%g' y='%g' "
        "text-anchor='end'>%.0f</text>\n",
        L, Y(c), W - R, Y(c), L - 6, Y(c) + 4, c);
  for (int d = lo; d <= hi; ++d)
    s += absl::StrFormat("<text x='%g' y='%g' text-anchor='middle'>1e%d</text>\n", X(d),
                         H - B + 18, d);
  s += absl::StrFormat("<text x='%g' y='%g' text-anchor='middle'>0</text>\n", L + zero_w / 2 + 2,
                       H - B + 18);
  s += absl::StrFormat(
      "<text x='%g' y='%g' text-anchor='middle'>KL divergence (nats, log scale; the bar at 0 "
      "holds zeros and values below 1e%d)</text>\n",
      (L + W - R) / 2, H - 12, lo);
  s += absl::StrFormat(
      "<text x='16' y='%g' transform='rotate(-90 16 %g)' text-anchor='middle'>tokens</text>\n",
      (T + H - B) / 2, (T + H - B) / 2);
  // Bars.
  // Each bar's title (a tooltip) gives its range and count.
  auto bar = [&](double x, double w, size_t c, const char* fill, const std::string& range) {
    if (c)
      s += absl::StrFormat(
          "<rect x='%g' y='%g' width='%g' height='%g' fill='%s'><title>%s: %d tokens</title>"
          "</rect>\n",
          x, Y(double(c)), std::max(1.0, w - 1), H - B - Y(double(c)), fill, range, c);
  };
  bar(L + 2, zero_w, count[0], "#999", absl::StrFormat("KLD below 1e%d", lo));
  const double bw = (W - R - x0) / double(bins);
  for (int b = 0; b < bins; ++b)
    bar(x0 + b * bw, bw, count[size_t(b) + 1], "#4c78a8",
        absl::StrFormat("KLD %.3g to %.3g", std::pow(10.0, lo + double(b) / kBinsPerDecade),
                        std::pow(10.0, lo + double(b + 1) / kBinsPerDecade)));
  // Marks: dashed lines, named with their values in a legend above the plot.
  const std::pair<const char*, double> marks[] = {
      {"mean", r.kld.mean}, {"median", r.kld_q.median}, {"p99", r.kld_q.p99}};
  const char* colors[] = {"#d62728", "#2ca02c", "#ff7f0e"};
  for (int i = 0; i < 3; ++i) {
    const double v = marks[i].second;
    s += absl::StrFormat("<text x='%g' y='58' fill='%s'>- - %s %.3g</text>\n", L + 150 * i,
                         colors[i], marks[i].first, v);
    if (v <= 0 || std::log10(v) < lo) continue;
    const double x = X(std::log10(v));
    s += absl::StrFormat(
        "<line x1='%g' y1='%g' x2='%g' y2='%g' stroke='%s' stroke-dasharray='5,3' "
        "stroke-width='1.5'/>\n",
        x, T, x, H - B, colors[i]);
  }
  return s + "</svg>\n";
}

}  // namespace cact
