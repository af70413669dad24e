#include "train/loss_curve.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/atomic_file.h"

namespace cact::train {
namespace {

absl::Status WriteText(const std::string& path, const std::string& text) {
  return WriteFileAtomic(
      path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '\'')
      out += "&#39;";
    else
      out += c;
  }
  return out;
}

}  // namespace

std::string LossCurveTsv(const std::vector<LossPoint>& points) {
  std::string s = "step\ttokens\tlr\ttrain_loss\theldout_loss\tseconds\tqat\n";
  for (const LossPoint& p : points) {
    absl::StrAppendFormat(
        &s, "%d\t%d\t%.6g\t%.6f\t%s\t%.2f\t%d\n", p.step, p.tokens, p.lr, p.train_loss,
        std::isnan(p.heldout_loss) ? std::string("") : absl::StrFormat("%.6f", p.heldout_loss),
        p.seconds, p.qat ? 1 : 0);
  }
  return s;
}

std::string LossCurveSvg(const std::vector<LossPoint>& points, const LossCurvePlot& plot) {
  const double W = 720, H = 420, left = 64, right = 20, top = 40, bottom = 52;
  const double pw = W - left - right, ph = H - top - bottom;
  double max_tokens = 1, lo = INFINITY, hi = 0;
  for (const LossPoint& p : points) {
    max_tokens = std::max(max_tokens, double(p.tokens));
    for (double v : {p.train_loss, p.heldout_loss}) {
      if (std::isnan(v) || v <= 0) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  if (!std::isnan(plot.unigram_loss) && plot.unigram_loss > 0) {
    lo = std::min(lo, plot.unigram_loss);
    hi = std::max(hi, plot.unigram_loss);
  }
  if (!(hi > 0)) lo = 1, hi = 10;
  // log-scaled loss axis with a margin, so late small improvements stay visible
  const double ylo = std::log(lo) - 0.05, yhi = std::log(hi) + 0.05;
  auto X = [&](double tokens) { return left + pw * tokens / max_tokens; };
  auto Y = [&](double loss) { return top + ph * (yhi - std::log(loss)) / (yhi - ylo); };

  std::string s = absl::StrFormat(
      "<svg xmlns='http://www.w3.org/2000/svg' width='%g' height='%g' font-family='sans-serif' "
      "font-size='12'>\n<rect width='100%%' height='100%%' fill='white'/>\n"
      "<text x='%g' y='22' font-size='14' font-weight='bold'>%s</text>\n",
      W, H, left, Escape(plot.title));
  // quantization-aware phase
  for (size_t i = 0; i < points.size(); ++i) {
    if (!points[i].qat) continue;
    const double x0 = X(i ? double(points[i - 1].tokens) : 0);
    size_t j = i;
    while (j + 1 < points.size() && points[j + 1].qat) ++j;
    s += absl::StrFormat(
        "<rect x='%.1f' y='%g' width='%.1f' height='%g' fill='#fde9c9'><title>quantization-aware "
        "phase (CQ fake quantization, straight-through)</title></rect>\n"
        "<text x='%.1f' y='%g' fill='#a86400'>QAT</text>\n",
        x0, top, X(double(points[j].tokens)) - x0, ph, x0 + 4, top + 14);
    i = j;
  }
  // axes and ticks
  s += absl::StrFormat("<rect x='%g' y='%g' width='%g' height='%g' fill='none' stroke='#444'/>\n",
                       left, top, pw, ph);
  for (int k = 0; k <= 4; ++k) {
    const double t = max_tokens * k / 4;
    s += absl::StrFormat("<text x='%.1f' y='%g' text-anchor='middle'>%.1fM</text>\n", X(t),
                         top + ph + 16, t / 1e6);
  }
  s += absl::StrFormat("<text x='%g' y='%g' text-anchor='middle'>training tokens</text>\n",
                       left + pw / 2, H - 12);
  for (int k = 0; k <= 5; ++k) {
    const double v = std::exp(ylo + (yhi - ylo) * k / 5);
    s += absl::StrFormat(
        "<line x1='%g' x2='%g' y1='%.1f' y2='%.1f' stroke='#eee'/>"
        "<text x='%g' y='%.1f' text-anchor='end'>%.2f</text>\n",
        left, left + pw, Y(v), Y(v), left - 6, Y(v) + 4, v);
  }
  s += absl::StrFormat(
      "<text transform='translate(16,%g) rotate(-90)' text-anchor='middle'>loss (nats/token, log "
      "scale)</text>\n",
      top + ph / 2);
  if (!std::isnan(plot.unigram_loss)) {
    s += absl::StrFormat(
        "<line x1='%g' x2='%g' y1='%.1f' y2='%.1f' stroke='#888' stroke-dasharray='6,4'/>"
        "<text x='%g' y='%.1f' text-anchor='end' fill='#666'>unigram %.3f (ppl %.1f)</text>\n",
        left, left + pw, Y(plot.unigram_loss), Y(plot.unigram_loss), left + pw - 4,
        Y(plot.unigram_loss) - 4, plot.unigram_loss, std::exp(plot.unigram_loss));
  }
  auto polyline = [&](bool heldout, const char* color, const char* name) {
    std::string pts, dots;
    for (const LossPoint& p : points) {
      const double v = heldout ? p.heldout_loss : p.train_loss;
      if (std::isnan(v) || v <= 0) continue;
      absl::StrAppendFormat(&pts, "%.1f,%.1f ", X(double(p.tokens)), Y(v));
      if (heldout) {
        absl::StrAppendFormat(&dots,
                              "<circle cx='%.1f' cy='%.1f' r='3' fill='%s'><title>step %d: "
                              "held-out %.4f (ppl %.2f)</title></circle>\n",
                              X(double(p.tokens)), Y(v), color, p.step, v, std::exp(v));
      }
    }
    return absl::StrFormat(
        "<polyline fill='none' stroke='%s' stroke-width='1.6' points='%s'>"
        "<title>%s</title></polyline>\n%s",
        color, pts, name, dots);
  };
  s += polyline(false, "#1f77b4", "training loss (mean since the previous point)");
  s += polyline(true, "#d62728", "held-out loss");
  s += absl::StrFormat(
      "<line x1='%g' x2='%g' y1='%g' y2='%g' stroke='#1f77b4' stroke-width='2'/>"
      "<text x='%g' y='%g'>training</text>\n"
      "<line x1='%g' x2='%g' y1='%g' y2='%g' stroke='#d62728' stroke-width='2'/>"
      "<text x='%g' y='%g'>held-out</text>\n",
      W - 190, W - 170, top + ph - 30, top + ph - 30, W - 165, top + ph - 26, W - 110, W - 90,
      top + ph - 30, top + ph - 30, W - 85, top + ph - 26);
  return s + "</svg>\n";
}

absl::Status WriteLossCurveTsv(const std::string& path, const std::vector<LossPoint>& points) {
  return WriteText(path, LossCurveTsv(points));
}

absl::Status WriteLossCurveSvg(const std::string& path, const std::vector<LossPoint>& points,
                               const LossCurvePlot& plot) {
  return WriteText(path, LossCurveSvg(points, plot));
}

}  // namespace cact::train
