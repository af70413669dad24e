#include "tools/cact-run/bench/bench.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <sstream>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/fast_forward.h"
#include "engine/forward.h"
#include "engine/kernels/isa.h"
#include "lib/atomic_file.h"
#include "lib/counted.h"
#include "lib/cpu_features.h"
#include "lib/file_bytes.h"
#include "lib/file_identity.h"
#include "lib/resources.h"
#include "lib/sha256.h"
#include "lib/status.h"
#include "nlohmann/json.hpp"
#include "tools/cact-run/bench/bench_session.h"
#include "tools/cact-run/bench/tool_call_bench.h"
#include "tools/cact-run/bench/machine.h"
#include "tools/common/cli.h"

namespace cact {
namespace {

constexpr char kArmNames[] =
    "fast, fast-int8, ref, torch; fast-rows, fast-int8-rows: fast paths without code tiles";

struct Test {
  std::string name;
  bool prefill = false;
  uint32_t depth = 0, tokens = 0;
};

struct Key {
  std::string arm;
  uint32_t threads;
  std::string test;
  bool operator<(const Key& o) const {
    return std::tie(arm, threads, test) < std::tie(o.arm, o.threads, o.test);
  }
};

struct Stats {
  double mean = 0, sd = 0;
  size_t n = 0;
};
Stats Summarise(const std::vector<double>& v) {
  Stats s;
  s.n = v.size();
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= double(v.size());
  if (v.size() > 1) {
    for (double x : v) s.sd += (x - s.mean) * (x - s.mean);
    s.sd = std::sqrt(s.sd / double(v.size() - 1));
  }
  return s;
}

// What one decoded token reads and multiplies: every CQ matrix the forward uses (tables
// are row lookups, not products).
struct ModelCost {
  uint64_t code_bytes = 0, macs = 0;
};
ModelCost DecodeCost(const Model& m) {
  ModelCost c;
  auto add = [&](const MatrixView& v) {
    if (!v.is_cq()) return;
    c.code_bytes += v.cq.code_bytes();
    c.macs += uint64_t(v.cq.out) * v.cq.in_pad();
  };
  add(m.embedding());
  for (const LayerWeights& l : m.layers())
    for (const MatrixView* v : {&l.q_proj, &l.k_proj, &l.v_proj, &l.gate_proj, &l.out_proj})
      add(*v);
  add(m.mhc().phi_pre);
  add(m.mhc().phi_post);
  add(m.mhc().phi_res);
  for (const EngramSiteWeights& e : m.engram_sites()) {
    add(e.key_proj);
    add(e.value_proj);
  }
  return c;
}

std::string FileSha256(const std::string& path) {
  std::error_code ec;
  if (path.empty() || !std::filesystem::is_regular_file(path, ec)) return "?";
  auto bytes = FileBytes::Open(path);
  if (!bytes.ok()) return "?";
  return Sha256Hex(bytes->span());
}

// Build description: the engine is compiled for baseline x86-64; each kernel file gets its
// ISA's flags (engine/kernels/CMakeLists.txt) and the kernel is chosen at run time.
#ifdef __OPTIMIZE__
constexpr const char* kBuildFlags =
    "optimised build (Release: -O3), baseline x86-64 + per-ISA kernel flags";
#else
constexpr const char* kBuildFlags = "UNOPTIMISED build";
#endif

std::string SelfPath() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

class Bench {
 public:
  Bench(const BenchOptions& o, const Model& model) : o_(o), model_(model) {}

  absl::StatusOr<std::string> Run() {
    const Geometry& g = model_.geometry();
    if (o_.gen == 0 || o_.gen >= g.max_seq_len)
      return absl::InvalidArgumentError("-n must be in 1..max_seq_len-1");
    for (uint32_t p : o_.prompt) {
      if (p == 0 || p > g.max_seq_len)
        return absl::InvalidArgumentError(
            absl::StrFormat("-p %u is outside 1..%u", p, g.max_seq_len));
      tests_.push_back({"pp" + std::to_string(p), true, 0, p});
    }
    for (uint32_t d : o_.depths) {
      // Given depths are refused past the model, the default list adapts (its name shows it).
      if (o_.depths_given && uint64_t(d) + o_.gen > g.max_seq_len)
        return absl::InvalidArgumentError(absl::StrFormat(
            "-d %u with -n %u needs %u positions, the model has %u (max_seq_len)", d, o_.gen,
            uint64_t(d) + o_.gen, g.max_seq_len));
      const uint32_t depth = std::min(d, g.max_seq_len - o_.gen);
      tests_.push_back({absl::StrFormat("tg%u @ d%u", o_.gen, depth), false, depth, o_.gen});
    }
    for (const std::string& a : o_.arms)
      if (!IsFastArm(a) && a != "ref" && a != "torch")
        return absl::InvalidArgumentError("unknown arm '" + a + "' (" + kArmNames + ")");
    arms_.clear();
    for (const std::string& a : o_.arms) {
      if (o_.kernels.empty() || !IsFastArm(a)) {
        arms_.push_back(a);
        continue;
      }
      for (const std::string& k : o_.kernels) arms_.push_back(a + "@" + k);
    }
    for (const std::string& k : o_.kernels) {
      auto isa = kernels::ParseIsa(k);
      if (!isa.ok()) return isa.status();
      if (!kernels::IsaSupported(*isa))
        return absl::InvalidArgumentError("kernel '" + k + "' is not supported by this CPU");
    }
    if (!o_.torch_binary.empty() && std::find(arms_.begin(), arms_.end(), "torch") == arms_.end())
      arms_.push_back("torch");
    if (std::find(arms_.begin(), arms_.end(), "torch") != arms_.end()) {
      if (o_.torch_binary.empty())
        return absl::InvalidArgumentError("the torch arm needs --torch PATH/cact-torch");
      if (auto st = ExportTorch(); !st.ok()) return st;
    }
    std::mt19937 rng(uint32_t(o_.seed));
    tokens_.resize(g.max_seq_len);
    tokens_[0] = 2;
    for (size_t i = 1; i < tokens_.size(); ++i) tokens_[i] = int32_t(4 + rng() % (g.vocab - 4));

    cost_ = DecodeCost(model_);
    for (uint32_t t : o_.threads) {
      Limits lim;
      lim.read_gbs = kernels::MeasureReadBandwidth(cost_.code_bytes, t, o_.limits_seconds);
      lim.int8_gmacs = kernels::MeasureInt8Throughput(t, o_.limits_seconds);
      limits_[t] = lim;
    }

    // Alternate: every repetition runs every test on every arm back to back.
    for (uint32_t r = 0; r < o_.reps; ++r)
      for (const Test& test : tests_)
        for (uint32_t threads : o_.threads)
          for (const std::string& arm : arms_) {
            auto tps = RunOne(arm, threads, test);
            if (!tps.ok()) return tps.status();
            if (*tps > 0) samples_[{arm, threads, test.name}].push_back(*tps);
            std::fprintf(stderr, "\r[rep %u/%u] %-9s t%u %-16s %10.1f t/s   ", r + 1, o_.reps,
                         arm.c_str(), threads, test.name.c_str(), *tps);
          }
    std::fprintf(stderr, "\n");
    for (uint32_t t : o_.threads) {
      SessionOptions so;
      so.model_path = o_.model_path;
      so.run_binary = o_.run_binary.empty() ? SelfPath() : o_.run_binary;
      so.prompt.assign(tokens_.begin(), tokens_.begin() + o_.prompt.front());  // the ppN ids
      so.session_tokens = o_.session_tokens;
      so.threads = t;
      so.reps = o_.reps;
      std::fprintf(stderr, "[session] %u thread%s: open/setup x%u, %u-token session\n", t,
                   t > 1 ? "s" : "", o_.reps, o_.session_tokens);
      CACT_ASSIGN_OR_RETURN(sessions_[t], MeasureSession(so));
    }
    if (o_.tool_call_tokens > 0 && !model_.file().tokenizer_blob().empty()) {
      for (uint32_t t : o_.threads) {
        ToolCallBenchOptions to;
        to.model_path = o_.model_path;
        to.threads = t;
        to.reps = o_.reps;
        to.max_tokens = o_.tool_call_tokens;
        CACT_ASSIGN_OR_RETURN(tool_calls_[t], MeasureToolCalls(to));
      }
    }
    if (!o_.json_out.empty()) {
      const std::string j = Json();
      CACT_RETURN_IF_ERROR(WriteFileAtomic(
          o_.json_out,
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(j.data()), j.size())));
    }
    if (!o_.svg_out.empty()) {
      const std::string svg = Svg();
      CACT_RETURN_IF_ERROR(WriteFileAtomic(
          o_.svg_out,
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(svg.data()), svg.size())));
    }
    return o_.format == "json" ? Json() : Markdown();
  }

 private:
  struct Limits {
    double read_gbs = 0, int8_gmacs = 0;
  };

  // fast, fast-int8, and each with "-rows": without code tiles (the kernels read the file's
  // rows), to measure what the tiles give.
  static bool IsFastArm(const std::string& a) {
    return a == "fast" || a == "fast-int8" || a == "fast-rows" || a == "fast-int8-rows";
  }
  // An arm's forward path and CQ kernel ("fast-int8@amx": fast-int8 on amx; no '@': the
  // active kernel).
  static std::pair<std::string, std::string> SplitArm(const std::string& arm) {
    const size_t at = arm.find('@');
    if (at == std::string::npos) return {arm, ""};
    return {arm.substr(0, at), arm.substr(at + 1)};
  }
  // The arm the ratio and floor tables are about: fast (on the first kernel of --kernels).
  std::string MainArm() const { return o_.kernels.empty() ? "fast" : "fast@" + o_.kernels[0]; }

  // The attention window the forward paths run with.
  uint32_t Window() const { return o_.window >= 0 ? uint32_t(o_.window) : model_.kv_window(); }

  // Calls row(test, threads, arm, samples) for every measured combination, in report order.
  template <typename Row>
  void ForEachResult(Row row) const {
    for (const Test& test : tests_)
      for (uint32_t t : o_.threads)
        for (const std::string& arm : arms_) {
          auto it = samples_.find({arm, t, test.name});
          if (it != samples_.end()) row(test, t, arm, it->second);
        }
  }

  double FloorMs(uint32_t threads) const {
    const Limits& l = limits_.at(threads);
    const double mem = double(cost_.code_bytes) / (l.read_gbs * 1e9);
    const double mac = double(cost_.macs) / (l.int8_gmacs * 1e9);
    return 1e3 * std::max(mem, mac);
  }

  absl::Status ExportTorch() {
    torch_dir_ =
        std::filesystem::temp_directory_path() / ("cact_bench_" + std::to_string(getpid()));
    std::filesystem::create_directories(torch_dir_);
    torch_model_ = (torch_dir_ / "model.pt").string();
    auto out = CaptureStdout(o_.torch_binary + " export '" + o_.model_path + "' -o '" +
                             torch_model_ + "'");
    if (!out.ok()) return out.status();
    return absl::OkStatus();
  }

  Forward* Path(const std::string& arm, uint32_t threads) {
    auto key = std::make_pair(arm, threads);
    auto it = paths_.find(key);
    if (it != paths_.end()) return it->second.get();
    ForwardOptions opt;
    opt.threads = int(threads);
    opt.attn.window = Window();
    opt.attn.sink = o_.sink;
    std::unique_ptr<Forward> f;
    const std::string path = SplitArm(arm).first;
    if (path == "ref") {
      f = MakeReferenceForward(model_, opt);
    } else {
      FastForwardOptions fo;
      if (path.starts_with("fast-int8")) fo.two_level_activations = fo.codebook_residual = false;
      if (path.ends_with("-rows")) fo.code_tiles = false;
      f = MakeFastForward(model_, opt, fo);
    }
    return (paths_[key] = std::move(f)).get();
  }

  // Tokens per second of one run, or 0 when the arm skips the test.
  absl::StatusOr<double> RunOne(const std::string& arm, uint32_t threads, const Test& test) {
    const std::span<const int32_t> all(tokens_);
    if (arm == "torch") {
      if (!test.prefill) return 0.0;
      std::string ids = absl::StrJoin(all.subspan(0, test.tokens), ",");
      auto out = CaptureStdout(absl::StrFormat("%s run '%s' --tokens %s -w 2 -r 1 -t %u --json",
                                               o_.torch_binary, torch_model_, ids, threads));
      if (!out.ok()) return out.status();
      auto j = nlohmann::json::parse(*out, nullptr, false);
      if (j.is_discarded() || !j.contains("tokens_per_s"))
        return absl::InternalError("unexpected cact-torch output: " + *out);
      return j["tokens_per_s"].get<double>();
    }
    if (arm == "ref" && test.depth + test.tokens > o_.ref_max_tokens) return 0.0;
    // The arm's kernel for this run only (the kernels are chosen per call).
    struct KernelScope {
      kernels::Isa before = kernels::ActiveIsa();
      ~KernelScope() { kernels::SetActiveIsa(before); }
    } scope;
    if (const std::string k = SplitArm(arm).second; !k.empty())
      kernels::SetActiveIsa(*kernels::ParseIsa(k));  // checked in Run()
    Forward* f = Path(arm, threads);
    f->Reset();
    std::vector<float> logits;
    if (test.prefill) {
      const Stopwatch clock;
      CACT_RETURN_IF_ERROR(f->Feed(all.subspan(0, test.tokens), &logits, false));
      return test.tokens / clock.Seconds();
    }
    if (test.depth) CACT_RETURN_IF_ERROR(f->Feed(all.subspan(0, test.depth), nullptr, false));
    const Stopwatch clock;
    for (uint32_t i = 0; i < test.tokens; ++i)
      CACT_RETURN_IF_ERROR(f->Feed(all.subspan(test.depth + i, 1), &logits, false));
    return test.tokens / clock.Seconds();
  }

  std::string Header() const {
    const CpuFeatures& cpu = GetCpuFeatures();
    return absl::StrFormat(
        "cact-run bench: %s (sha256 %s)\nCPU: %s, kernel ISA %s; binary %s (sha256 %s), %s, "
        "compiler GCC %s\nmodel: %.2f MB of codes and %.1f M int8 multiply-adds per decoded token; "
        "window %d, sink %u; %s, arms alternated within each\n",
        o_.model_path, model_sha_, cpu.brand,
        o_.kernels.empty() ? std::string(kernels::IsaName(kernels::ActiveIsa()))
                           : absl::StrJoin(o_.kernels, ", ") + " (arm@kernel)",
        SelfPath(),
        self_sha_, kBuildFlags, __VERSION__, cost_.code_bytes / 1e6, cost_.macs / 1e6,
        int(Window()), o_.sink, Counted(o_.reps, "repetition"));
  }

  std::string Markdown() const {
    std::ostringstream s;
    s << Header() << "\n| arm | threads | test | t/s |\n|---|---:|---|---:|\n";
    ForEachResult([&](const Test& test, uint32_t t, const std::string& arm,
                      const std::vector<double>& v) {
      const Stats st = Summarise(v);
      s << absl::StrFormat("| %s | %u | %s | %.1f ± %.1f |\n", arm, t, test.name, st.mean, st.sd);
    });
    // Ratios of the main fast arm to every other arm.
    const std::string main_arm = MainArm();
    std::vector<std::string> others;
    for (const std::string& a : arms_)
      if (a != main_arm) others.push_back(a);
    if (!others.empty() && std::find(arms_.begin(), arms_.end(), main_arm) != arms_.end()) {
      s << "\n| threads | test |";
      for (const std::string& a : others) s << " " << main_arm << " / " << a << " |";
      s << "\n|---:|---|";
      for (size_t i = 0; i < others.size(); ++i) s << "---:|";
      s << "\n";
      for (const Test& test : tests_)
        for (uint32_t t : o_.threads) {
          auto f = samples_.find({main_arm, t, test.name});
          if (f == samples_.end()) continue;
          s << "| " << t << " | " << test.name << " |";
          const double fm = Summarise(f->second).mean;
          for (const std::string& a : others) {
            auto o = samples_.find({a, t, test.name});
            if (o == samples_.end())
              s << " – |";
            else
              s << absl::StrFormat(" %.2f× |", fm / Summarise(o->second).mean);
          }
          s << "\n";
        }
    }
    s << KernelRatioMarkdown();
    s << SessionMarkdown();
    s << ToolCallMarkdown();
    s << absl::StrFormat("\nmachine limits (buffer of %.2f MB = the model's codes):\n\n",
                         cost_.code_bytes / 1e6);
    s << "| threads | read GB/s | int8 GMAC/s | floor ms/token | fast tg ms/token (best depth) | "
         "fraction of floor |\n";
    s << "|---:|---:|---:|---:|---:|---:|\n";
    for (uint32_t t : o_.threads) {
      const Limits& l = limits_.at(t);
      double best = 0;
      for (const Test& test : tests_) {
        if (test.prefill) continue;
        auto f = samples_.find({main_arm, t, test.name});
        if (f != samples_.end()) best = std::max(best, Summarise(f->second).mean);
      }
      const double floor = FloorMs(t), ms = best > 0 ? 1e3 / best : 0;
      s << absl::StrFormat("| %u | %.1f | %.1f | %.4f | %s | %s |\n", t, l.read_gbs, l.int8_gmacs,
                           floor, best > 0 ? absl::StrFormat("%.4f", ms) : "–",
                           best > 0 ? absl::StrFormat("%.1f %%", 100 * floor / ms) : "–");
    }
    return s.str();
  }

  // Each fast arm on every other kernel against the first kernel of --kernels.
  std::string KernelRatioMarkdown() const {
    if (o_.kernels.size() < 2) return "";
    std::vector<std::pair<std::string, std::string>> pairs;  // (arm@k, arm@first)
    for (const std::string& a : o_.arms)
      if (IsFastArm(a))
        for (size_t i = 1; i < o_.kernels.size(); ++i)
          pairs.emplace_back(a + "@" + o_.kernels[i], a + "@" + o_.kernels[0]);
    std::ostringstream s;
    s << "\nkernels side by side (same runs):\n\n| threads | test |";
    for (const auto& [num, den] : pairs) s << " " << num << " / " << den << " |";
    s << "\n|---:|---|";
    for (size_t i = 0; i < pairs.size(); ++i) s << "---:|";
    s << "\n";
    for (const Test& test : tests_)
      for (uint32_t t : o_.threads) {
        s << "| " << t << " | " << test.name << " |";
        for (const auto& [num, den] : pairs) {
          auto a = samples_.find({num, t, test.name}), b = samples_.find({den, t, test.name});
          if (a == samples_.end() || b == samples_.end())
            s << " – |";
          else
            s << absl::StrFormat(" %.2f× |", Summarise(a->second).mean / Summarise(b->second).mean);
        }
        s << "\n";
      }
    return s.str();
  }

  // One tool call end to end, and the grammar's cost per decoded token.
  std::string ToolCallMarkdown() const {
    if (tool_calls_.empty()) return "";
    const ToolCallFigures& any = tool_calls_.begin()->second;
    std::ostringstream s;
    s << absl::StrFormat(
        "\ntool call (fast path, 4 tools, %u prompt tokens, answer budget %u tokens, greedy; "
        "%s, constrained and free decoding back to back in each):\n\n",
        any.prompt_tokens, o_.tool_call_tokens, Counted(o_.reps, "repetition"));
    s << "| threads | cold ms | warm ms | warm / cold | warm from file ms | prefill ms cold / "
         "warm | answer tokens | constrained t/s | free t/s | constrained / free | mask / "
         "decode |\n";
    s << "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const auto& [t, f] : tool_calls_) {
      const double c = Summarise(f.constrained_tps).mean, fr = Summarise(f.free_tps).mean;
      const double cold = Summarise(f.total_ms).mean, warm = Summarise(f.warm_ms).mean;
      s << absl::StrFormat(
          "| %u | %.1f ± %.1f | %.1f ± %.1f | %.2f | %.1f ± %.1f | %.1f / %.1f | %.0f | %.1f | "
          "%.1f | %.3f | %.1f %% |\n",
          t, cold, Summarise(f.total_ms).sd, warm, Summarise(f.warm_ms).sd,
          cold > 0 ? warm / cold : 0, Summarise(f.file_ms).mean, Summarise(f.file_ms).sd,
          Summarise(f.prefill_ms).mean, Summarise(f.warm_prefill_ms).mean,
          Summarise(f.answer_tokens).mean, c, fr, fr > 0 ? c / fr : 0,
          100 * Summarise(f.mask_share).mean);
    }
    s << absl::StrFormat(
        "\ncold: the whole prompt fed; warm: the tools prefix restored in the same process; "
        "from file: model opened and the prefix loaded from a prompt cache of %.2f MiB, as a "
        "new process would (process start not included). Answers identical in all three.\n",
        double(any.prompt_cache_bytes) / (1 << 20));
    return s.str();
  }

  // Start-up and memory: in-process open/setup timings and the fresh-process session.
  std::string SessionMarkdown() const {
    if (sessions_.empty()) return "";
    const SessionFigures& any = sessions_.begin()->second;
    std::ostringstream s;
    const std::string session =
        any.session_tokens == 0
            ? std::string("session: skipped, --session 0")
            : absl::StrFormat(
                  "session: a fresh cact-run, %u prompt tokens then decoding to %u positions",
                  any.prompt, any.session_tokens);
    s << absl::StrFormat(
        "\nstart-up and memory (open + validate and fast-path setup: mean ± sd of %u in this "
        "process; %s):\n\n",
        o_.reps, session);
    s << "| threads | open + validate ms | fast-path setup ms | session peak RSS MiB | session "
         "load ms | session decode t/s |\n";
    s << "|---:|---:|---:|---:|---:|---:|\n";
    for (const auto& [t, f] : sessions_) {
      const Stats op = Summarise(f.open_ms), su = Summarise(f.setup_ms);
      s << absl::StrFormat("| %u | %.2f ± %.2f | %.2f ± %.2f | %s | %s | %s |\n", t, op.mean, op.sd,
                           su.mean, su.sd,
                           f.session_tokens ? absl::StrFormat("%.1f", f.session_peak_rss_mb) : "–",
                           f.session_tokens ? absl::StrFormat("%.1f", f.session_load_ms) : "–",
                           f.session_tokens ? absl::StrFormat("%.1f", f.session_decode_tps) : "–");
    }
    return s.str();
  }

  // Decode tokens/s against context depth, one polyline per (arm, threads), with the
  // machine's floor (1 / floor time per token) as a dashed line per thread count.
  std::string Svg() const {
    const double W = 640, H = 400, L = 70, R = 180, T = 30, B = 50;
    std::vector<const Test*> tg;
    double max_depth = 1, max_tps = 1;
    for (const Test& t : tests_)
      if (!t.prefill) {
        tg.push_back(&t);
        max_depth = std::max(max_depth, double(t.depth));
      }
    for (const auto& [key, v] : samples_)
      for (const Test* t : tg)
        if (key.test == t->name) max_tps = std::max(max_tps, Summarise(v).mean + Summarise(v).sd);
    max_tps *= 1.1;
    auto X = [&](double d) { return L + (W - L - R) * d / max_depth; };
    auto Y = [&](double v) { return H - B - (H - T - B) * v / max_tps; };
    std::ostringstream s;
    s << absl::StrFormat(
        "<svg xmlns='http://www.w3.org/2000/svg' width='%g' height='%g' font-family='sans-serif' "
        "font-size='12'>\n",
        W, H);
    s << "<rect width='100%' height='100%' fill='white'/>\n";
    s << absl::StrFormat(
        "<text x='%g' y='18' font-size='14'>decode tokens/s vs context depth (tg%u, %s)</text>\n",
        L, o_.gen, std::filesystem::path(o_.model_path).filename().string());
    s << absl::StrFormat("<line x1='%g' y1='%g' x2='%g' y2='%g' stroke='black'/>\n", L, H - B,
                         W - R, H - B);
    s << absl::StrFormat("<line x1='%g' y1='%g' x2='%g' y2='%g' stroke='black'/>\n", L, T, L,
                         H - B);
    for (int i = 0; i <= 5; ++i) {
      const double v = max_tps * i / 5, d = max_depth * i / 5;
      s << absl::StrFormat("<text x='%g' y='%g' text-anchor='end'>%.0f</text>\n", L - 6, Y(v) + 4,
                           v);
      s << absl::StrFormat("<line x1='%g' y1='%g' x2='%g' y2='%g' stroke='#ddd'/>\n", L, Y(v),
                           W - R, Y(v));
      s << absl::StrFormat("<text x='%g' y='%g' text-anchor='middle'>%.0f</text>\n", X(d),
                           H - B + 18, d);
    }
    s << absl::StrFormat("<text x='%g' y='%g' text-anchor='middle'>context depth (tokens)</text>\n",
                         (L + W - R) / 2, H - 10);
    const char* colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"};
    int ci = 0, row = 0;
    for (const std::string& arm : arms_)
      for (uint32_t t : o_.threads) {
        std::string pts;
        for (const Test* test : tg) {
          auto it = samples_.find({arm, t, test->name});
          if (it == samples_.end()) continue;
          pts += absl::StrFormat("%g,%g ", X(test->depth), Y(Summarise(it->second).mean));
        }
        if (pts.empty()) continue;
        const char* c = colors[ci++ % 6];
        s << absl::StrFormat("<polyline fill='none' stroke='%s' stroke-width='2' points='%s'/>\n",
                             c, pts);
        s << absl::StrFormat("<text x='%g' y='%g' fill='%s'>%s, %u thread%s</text>\n", W - R + 10,
                             T + 16 * (row++ + 1), c, arm, t, t > 1 ? "s" : "");
      }
    return s.str() + "</svg>\n";
  }

  std::string Json() const {
    nlohmann::ordered_json j;
    j["model"] = {{"path", o_.model_path},
                  {"sha256", model_sha_},
                  {"code_bytes", cost_.code_bytes},
                  {"macs_per_token", cost_.macs}};
    j["machine"] = {{"cpu", GetCpuFeatures().brand},
                    {"kernel", kernels::IsaName(kernels::ActiveIsa())},
                    {"kernels_compared", o_.kernels},
                    {"binary", SelfPath()},
                    {"binary_sha256", self_sha_},
                    {"compiler", std::string("GCC ") + __VERSION__},
                    {"build_flags", kBuildFlags}};
    j["config"] = {
        {"reps", o_.reps}, {"gen", o_.gen}, {"window", int(Window())}, {"sink", o_.sink}};
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    ForEachResult(
        [&](const Test& test, uint32_t t, const std::string& arm, const std::vector<double>& v) {
          const Stats st = Summarise(v);
          rows.push_back({{"arm", arm},
                          {"threads", t},
                          {"test", test.name},
                          {"kind", test.prefill ? "pp" : "tg"},
                          {"depth", test.depth},
                          {"tokens", test.tokens},
                          {"mean_tps", st.mean},
                          {"stddev_tps", st.sd},
                          {"samples", v}});
        });
    j["results"] = rows;
    nlohmann::ordered_json lim = nlohmann::ordered_json::array();
    for (uint32_t t : o_.threads)
      lim.push_back({{"threads", t},
                     {"read_gbs", limits_.at(t).read_gbs},
                     {"int8_gmacs", limits_.at(t).int8_gmacs},
                     {"floor_ms_per_token", FloorMs(t)}});
    j["limits"] = lim;
    nlohmann::ordered_json ses = nlohmann::ordered_json::array();
    for (const auto& [t, f] : sessions_)
      ses.push_back({{"threads", t},
                     {"open_validate_ms", f.open_ms},
                     {"fast_setup_ms", f.setup_ms},
                     {"open_validate_ms_mean", Summarise(f.open_ms).mean},
                     {"fast_setup_ms_mean", Summarise(f.setup_ms).mean},
                     {"session_prompt", f.prompt},
                     {"session_tokens", f.session_tokens},
                     {"session_peak_rss_bytes", uint64_t(f.session_peak_rss_mb * (1 << 20))},
                     {"session_load_ms", f.session_load_ms},
                     {"session_decode_tps", f.session_decode_tps}});
    j["session"] = ses;
    nlohmann::ordered_json calls = nlohmann::ordered_json::array();
    for (const auto& [t, f] : tool_calls_)
      calls.push_back({{"threads", t},
                       {"prompt_tokens", f.prompt_tokens},
                       {"answer_budget", o_.tool_call_tokens},
                       {"end_to_end_ms", f.total_ms},
                       {"warm_ms", f.warm_ms},
                       {"warm_prefill_ms", f.warm_prefill_ms},
                       {"warm_from_file_ms", f.file_ms},
                       {"prompt_cache_bytes", f.prompt_cache_bytes},
                       {"prefill_ms", f.prefill_ms},
                       {"answer_tokens", f.answer_tokens},
                       {"constrained_tps", f.constrained_tps},
                       {"free_tps", f.free_tps},
                       {"mask_share_of_decode", f.mask_share}});
    j["tool_call"] = calls;
    return j.dump(2) + "\n";
  }

  const BenchOptions& o_;
  const Model& model_;
  std::vector<Test> tests_;
  std::vector<std::string> arms_;
  std::vector<int32_t> tokens_;
  ModelCost cost_;
  std::map<uint32_t, Limits> limits_;
  std::map<Key, std::vector<double>> samples_;
  std::map<uint32_t, SessionFigures> sessions_;
  std::map<uint32_t, ToolCallFigures> tool_calls_;
  std::map<std::pair<std::string, uint32_t>, std::unique_ptr<Forward>> paths_;
  std::filesystem::path torch_dir_;
  std::string torch_model_;

 public:
  std::string model_sha_, self_sha_;
};

template <typename T>
bool ParseList(const std::string& text, std::vector<T>* out) {
  out->clear();
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    try {
      if constexpr (std::is_same_v<T, std::string>)
        out->push_back(std::string(part));
      else
        out->push_back(T(std::stoul(std::string(part))));
    } catch (...) {
      return false;
    }
  }
  return !out->empty();
}

}  // namespace

absl::StatusOr<std::string> RunBench(const BenchOptions& options) {
  auto model = Model::Open(options.model_path);
  if (!model.ok()) return model.status();
  // Refused, never capped (as everywhere): a window or sink the model cannot hold.
  const uint32_t max = (*model)->max_seq_len();
  if (options.window > int64_t(max))
    return absl::InvalidArgumentError(absl::StrFormat(
        "--window %d is more than the model's max_seq_len %d", options.window, max));
  if (options.sink > max)
    return absl::InvalidArgumentError(
        absl::StrFormat("--sink %d is more than the model's max_seq_len %d", options.sink, max));
  Bench b(options, **model);
  b.model_sha_ = FileSha256(options.model_path);
  b.self_sha_ = FileSha256(SelfPath());
  return b.Run();
}

int BenchMain(int argc, char** argv) {
  CLI::App app{"cact-run bench: throughput of the forward paths side by side (llama-bench style)"};
  tools::SetUpTool(app, "cact-run bench", "cact-run");
  BenchOptions o;
  std::string prompt = "256", depths = "0,256,1024,2048", threads = "1,2",
              arms = "fast,fast-int8,ref";
  app.add_option("model", o.model_path, ".cact model")->required();
  app.add_option("-p,--prompt", prompt, "prefill lengths, comma-separated (ppN tests)");
  app.add_option("-n,--gen", o.gen, "decoded tokens per tg test");
  auto* depth_opt = app.add_option(
      "-d,--depth", depths,
      "context depths of the tg tests, comma-separated; D + N must fit max_seq_len (the "
      "default list is capped to fit)");
  app.add_option("-r,--reps", o.reps, "repetitions (arms alternate within each)")
      ->check(tools::WholeIn(1, 1000));
  app.add_option("-t,--threads", threads, "thread counts, comma-separated");
  app.add_option("--arms", arms, std::string(kArmNames) + " (comma-separated)");
  std::string kernel_list;
  app.add_option("--kernels", kernel_list,
                 "CQ kernels to run each fast arm on, side by side (comma-separated, e.g. "
                 "avx512vbmi,amx; default: the active one)");
  app.add_option("--torch", o.torch_binary,
                 "cact-torch executable: adds the libtorch arm (prefill tests)");
  app.add_option("--ref-max-tokens", o.ref_max_tokens, "skip reference runs needing more tokens");
  app.add_option("--window", o.window,
                 "attention window, 0 (causal) to max_seq_len")
      ->check(tools::WholeIn(0, INT32_MAX))
      ->default_str("header kv_window");
  app.add_option("--sink", o.sink, "pinned first positions, 0 to max_seq_len")
      ->check(tools::WholeIn(0, UINT32_MAX));
  bool json = false;
  app.add_flag("--json", json, "print the report as JSON instead of markdown tables");
  // The old spelling of --json ("-o" names an output file in every other command): hidden.
  app.add_option("-o,--output", o.format, "deprecated: -o json is --json")
      ->check(CLI::IsMember({"md", "json"}))
      ->group("");
  app.add_option("--json-out", o.json_out, "also write the JSON report to this file");
  app.add_option("--session", o.session_tokens,
                 "positions of the fresh-process memory session (0: skip; capped at max_seq_len)");
  app.add_option("--svg", o.svg_out, "also write an SVG plot of decode tokens/s against depth");
  app.add_option("--tool-call", o.tool_call_tokens,
                 "answer budget of the tool-call figures (one call end to end, constrained vs "
                 "free decoding; 0: skip)");
  app.footer(
      "Examples:\n  cact-run bench model.cact -p 256 -n 128 -d 0,1024 -t 1,2\n"
      "  cact-run bench model.cact --json --json-out bench.json --svg decode.svg");
  if (auto code = tools::ParseCommandLine(app, argc, argv)) return *code;
  if (json) o.format = "json";
  o.depths_given = depth_opt->count() > 0;
  for (const auto& [out, role] :
       {std::pair{o.json_out, "--json-out"}, std::pair{o.svg_out, "--svg"}}) {
    if (absl::Status st = CheckOutputIsNotInput(out, {o.model_path, o.torch_binary}, role);
        !st.ok())
      return tools::ReportFailure("cact-run", st);
  }
  if (!ParseList(prompt, &o.prompt) || !ParseList(depths, &o.depths) ||
      !ParseList(threads, &o.threads) || !ParseList(arms, &o.arms) ||
      (!kernel_list.empty() && !ParseList(kernel_list, &o.kernels))) {
    std::fprintf(stderr,
                 "cact-run: -p, -d, -t, --arms and --kernels take comma-separated lists (see "
                 "'cact-run bench --help')\n");
    return 2;
  }
  for (uint32_t t : o.threads)
    if (t < 1 || t > 256) {
      std::fprintf(stderr, "cact-run: -t: thread counts must be 1..256 (see 'cact-run bench --help')\n");
      return 2;
    }
  auto report = RunBench(o);
  if (!report.ok()) {
    return tools::ReportFailure("cact-run", report.status());
  }
  std::fputs(report->c_str(), stdout);
  return 0;
}

}  // namespace cact
