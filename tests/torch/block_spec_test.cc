// The one description of the Needle block (formats/needle/block.h) drives all four
// executors: for single-constant changes to a copy of kNeedle2Block, the engine's FP32
// reference (Model::FromFile(file, block)), its fast path, the TorchScript module exported
// for that block and NeedleNet (a Geometry whose block_spec points to it) must
//   (a) still agree with each other, within the tolerances the other tests use:
//       TorchScript and NeedleNet against the reference max|diff| <= 1e-4 x max|reference|
//       (forward_test.cc, needle_net_test.cc: FP32 on both sides, only the summation order
//       differs); the fast path against the reference relative L2 <= 0.5 % (the fast path's
//       accuracy contract, tests/engine/fast_forward_test.cc: int8 activations and codebooks);
//   (b) each move away from its own default-block logits by far more than that tolerance
//       (100x: 1e-2 relative max difference; 3x for the fast path: 1.5 % relative L2, the
//       smallest measured move being 2.3 %: 20 Sinkhorn iterations down to one), so an
//       executor that ignores the constant fails (b) itself, and (a) for the others.
// The model is the tiny fixture (4 layers, 4 lanes, engram sites at layers 1 and 3).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>

#include "engine/forward.h"
#include "engine/forward_paths.h"
#include "engine/model.h"
#include "formats/needle/block.h"
#include "libtorch/needle_net.h"
#include "quant/dequant_export.h"
#include "torch_test_util.h"

namespace cact::testing {
namespace {

constexpr double kTorchTolerance = 1e-4;  // max|diff| / max|reference|
constexpr double kFastTolerance = 5e-3;   // relative L2
constexpr double kTorchMoved = 100 * kTorchTolerance;
constexpr double kFastMoved = 3 * kFastTolerance;

double RelL2(const std::vector<float>& a, const std::vector<float>& ref) {
  if (a.size() != ref.size() || ref.empty()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += double(a[i] - ref[i]) * (a[i] - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// The logits [T, vocab] of one token sequence by each executor.
struct Logits {
  std::vector<float> reference, fast, torchscript, needle_net;
};

const std::string kCase = "tiny";

std::vector<float> EngineLogits(const Model& model, const char* path,
                                const std::vector<int32_t>& tokens) {
  auto forward = MakeForwardPath(model, path, {});
  EXPECT_TRUE(forward.ok()) << forward.status();
  if (!forward.ok()) return {};
  std::vector<float> logits;
  EXPECT_TRUE((*forward)->Feed(tokens, &logits, true).ok()) << path;
  return logits;
}

// `block` must outlive the call only (every executor is built and dropped here).
Logits RunAll(const BlockSpec& block) {
  Logits out;
  const std::vector<int64_t> tokens = FixtureTokens64(kCase, "s2");
  const std::vector<int32_t> tokens32(tokens.begin(), tokens.end());
  {
    auto file = CactFile::Open(Fixture(kCase, "model.cact"));
    EXPECT_TRUE(file.ok()) << file.status();
    auto model = Model::FromFile(std::move(*file), block);
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return out;
    out.reference = EngineLogits(**model, "ref", tokens32);
    out.fast = EngineLogits(**model, "fast", tokens32);
  }
  auto file = CactFile::Open(Fixture(kCase, "model.cact"));
  EXPECT_TRUE(file.ok()) << file.status();
  {
    TempDir dir;
    const std::string pt = dir / "block.pt";
    absl::Status s = torchscript::ExportTorchScript(*file, pt, block);
    EXPECT_TRUE(s.ok()) << s;
    auto module = torchscript::TorchModel::Load(pt);
    EXPECT_TRUE(module.ok()) << module.status();
    if (module.ok()) {
      auto logits = (*module)->Logits(tokens, 1);
      EXPECT_TRUE(logits.ok()) << logits.status();
      if (logits.ok()) out.torchscript = std::move(*logits);
    }
  }
  {
    auto st = DequantizedWeights(*file);
    EXPECT_TRUE(st.ok()) << st.status();
    auto weights = train::FromSafetensors(*st, file->geometry(), kCase);
    EXPECT_TRUE(weights.ok()) << weights.status();
    Geometry g = file->geometry();
    g.block_spec = &block;
    train::NeedleNet net(g);
    torch::NoGradGuard no_grad;
    torch::Tensor t = net.Logits(torch::tensor(tokens).unsqueeze(0), *weights).contiguous();
    out.needle_net.assign(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
  }
  return out;
}

const Logits& DefaultLogits() {
  static const Logits logits = RunAll(kNeedle2Block);
  return logits;
}

struct BlockChange {
  std::string name;
  std::function<void(BlockSpec&)> apply;
};
void PrintTo(const BlockChange& c, std::ostream* os) { *os << c.name; }

std::vector<BlockChange> Changes() {
  return {
      {"sinkhorn_iters", [](BlockSpec& b) { b.sinkhorn_iters = 1; }},
      {"pre_offset_selected", [](BlockSpec& b) { b.pre_offset_selected = 0.5f; }},
      {"post_offset_other", [](BlockSpec& b) { b.post_offset_other = -3.0f; }},
      {"post_gain", [](BlockSpec& b) { b.post_gain = 0.75f; }},
      {"norm_eps", [](BlockSpec& b) { b.norm_eps = 0.5f; }},
      {"hash_seed", [](BlockSpec& b) { b.hash_seed = 0x2545F491u; }},
      {"hash_prime", [](BlockSpec& b) { b.hash_prime = 0x01000197u; }},
      {"hash_shift", [](BlockSpec& b) { b.hash_shift = 7; }},
  };
}

class BlockSpecChange : public ::testing::TestWithParam<BlockChange> {};

TEST_P(BlockSpecChange, EveryExecutorFollowsAndTheyAgree) {
  BlockSpec block = kNeedle2Block;
  GetParam().apply(block);
  const Logits& base = DefaultLogits();
  ASSERT_FALSE(base.reference.empty());
  // The executors agree on the default block (else the checks below prove nothing).
  ASSERT_LE(MaxRelErr(base.torchscript, base.reference), kTorchTolerance);
  ASSERT_LE(MaxRelErr(base.needle_net, base.reference), kTorchTolerance);
  ASSERT_LE(RelL2(base.fast, base.reference), kFastTolerance);

  const Logits got = RunAll(block);
  ASSERT_FALSE(got.reference.empty());
  // (a) they agree on the changed block
  const double ts_err = MaxRelErr(got.torchscript, got.reference);
  const double net_err = MaxRelErr(got.needle_net, got.reference);
  const double fast_err = RelL2(got.fast, got.reference);
  EXPECT_LE(ts_err, kTorchTolerance) << "TorchScript vs reference";
  EXPECT_LE(net_err, kTorchTolerance) << "NeedleNet vs reference";
  EXPECT_LE(fast_err, kFastTolerance) << "fast path vs reference (relative L2)";
  // (b) each one moved
  const double ref_moved = MaxRelErr(got.reference, base.reference);
  const double ts_moved = MaxRelErr(got.torchscript, base.torchscript);
  const double net_moved = MaxRelErr(got.needle_net, base.needle_net);
  const double fast_moved = RelL2(got.fast, base.fast);
  EXPECT_GE(ref_moved, kTorchMoved) << "the reference ignores the change";
  EXPECT_GE(ts_moved, kTorchMoved) << "TorchScript ignores the change";
  EXPECT_GE(net_moved, kTorchMoved) << "NeedleNet ignores the change";
  EXPECT_GE(fast_moved, kFastMoved) << "the fast path ignores the change";
  RecordProperty("torchscript_relerr", std::to_string(ts_err));
  RecordProperty("needle_net_relerr", std::to_string(net_err));
  RecordProperty("fast_rel_l2", std::to_string(fast_err));
  RecordProperty("moved", std::to_string(ref_moved) + " " + std::to_string(ts_moved) + " " +
                              std::to_string(net_moved) + " " + std::to_string(fast_moved));
}

INSTANTIATE_TEST_SUITE_P(Constants, BlockSpecChange, ::testing::ValuesIn(Changes()),
                         [](const auto& info) { return info.param.name; });

// A block the libtorch executors do not implement fails clearly rather than computing
// something else.
TEST(BlockSpec, UnsupportedStageOrderIsRefused) {
  BlockSpec block = kNeedle2Block;
  std::swap(block.stages.front(), block.stages.back());  // post-mix before pre-mix
  auto file = CactFile::Open(Fixture(kCase, "model.cact"));
  ASSERT_TRUE(file.ok()) << file.status();
  TempDir dir;
  absl::Status s = torchscript::ExportTorchScript(*file, dir / "bad.pt", block);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("pre-mix"), std::string::npos) << s;
  Geometry g = file->geometry();
  g.block_spec = &block;
  EXPECT_THROW(train::NeedleNet net(g), c10::Error);
}

}  // namespace
}  // namespace cact::testing
