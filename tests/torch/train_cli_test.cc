// cact-torch train / eval / finetune end to end on the tiny geometry. The oracles: the
// trainer's final held-out loss is scored through CQ fake quantization, which must equal what
// `cact-run perplexity` (the engine's reference path, a separate implementation) measures on
// the written .cact for the same tokens, and what `cact-torch eval --fake-quant` gives;
// the difference is only the FP16 rounding of norms and gates in the file (tolerance 2e-3
// relative on the PPL; a wrong chunking or tokenization moves it by far more).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "formats/safetensors.h"
#include "torch_test_util.h"

namespace cact::testing {
namespace {

std::string Src(const std::string& rel) { return std::string(CACT_SOURCE_DIR) + "/" + rel; }

// The number after `key` in `text` (e.g. "PPL " -> 9.27), or NaN.
double NumberAfter(const std::string& text, const std::string& key) {
  const size_t at = text.find(key);
  if (at == std::string::npos) return NAN;
  return std::strtod(text.c_str() + at + key.size(), nullptr);
}

std::string TrainCommand(const TempDir& dir, const std::string& extra) {
  return Tool("cact-torch") + " train --geometry tiny --text " + Src("docs/engine.md") + " " +
         Src("docs/cact-quant.md") + " --heldout " + Src("docs/architecture.md") +
         " --steps 12 --qat-steps 4 --warmup 2 --eval-every 6 --batch 4 --seq 64 -t 1 -q -o " +
         (dir / "m.cact") + " " + extra;
}

TEST(TrainCli, TrainsWritesAndScoresLikeTheEngine) {
  TempDir dir;
  CommandResult r = cact::testing::Run(TrainCommand(dir, ""));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* f : {"m.cact", "m.safetensors", "m.pre-qat.safetensors", "m.curve.tsv",
                        "m.curve.svg", "m.heldout.txt"})
    EXPECT_TRUE(std::filesystem::exists(dir / f)) << f;
  const double trained_ppl = NumberAfter(r.output, "nats, PPL ");
  ASSERT_FALSE(std::isnan(trained_ppl)) << r.output;

  CommandResult ppl =
      cact::testing::Run(Tool("cact-run") + " perplexity " + (dir / "m.cact") + " -f " +
                         (dir / "m.heldout.txt") + " --ctx 64 --chunks 128 --path ref --json -q");
  ASSERT_EQ(ppl.exit_code, 0) << ppl.output;
  const double engine_ppl = nlohmann::json::parse(ppl.output).at("ppl").get<double>();
  EXPECT_NEAR(engine_ppl, trained_ppl, 2e-3 * trained_ppl);

  CommandResult ev = cact::testing::Run(
      Tool("cact-torch") + " eval " + (dir / "m.safetensors") + " -f " + (dir / "m.heldout.txt") +
      " --ctx 64 --chunks 128 --fake-quant embedding=4,mhc=4,default=2 --json -t 1");
  ASSERT_EQ(ev.exit_code, 0) << ev.output;
  EXPECT_NEAR(nlohmann::json::parse(ev.output).at("ppl").get<double>(), trained_ppl,
              1e-5 * trained_ppl);

  // the curve has a header and one line per logged point, the last evaluated
  std::ifstream tsv(dir / "m.curve.tsv");
  std::string line, last;
  std::getline(tsv, line);
  EXPECT_EQ(line.rfind("step\ttokens\tlr\ttrain_loss\theldout_loss", 0), 0u);
  int rows = 0;
  while (std::getline(tsv, line)) ++rows, last = line;
  EXPECT_GE(rows, 4);
  EXPECT_EQ(last.rfind("12\t", 0), 0u) << last;
}

TEST(TrainCli, SameSeedSameWeights) {
  TempDir a, b;
  ASSERT_EQ(cact::testing::Run(TrainCommand(a, "")).exit_code, 0);
  ASSERT_EQ(cact::testing::Run(TrainCommand(b, "")).exit_code, 0);
  EXPECT_EQ(ReadAll(a / "m.cact"), ReadAll(b / "m.cact"));
  TempDir c;
  ASSERT_EQ(cact::testing::Run(TrainCommand(c, "--seed 1")).exit_code, 0);
  EXPECT_NE(ReadAll(a / "m.cact"), ReadAll(c / "m.cact"));
}

// Attention losses. A previous-token head: its loss is reported on every progress line and falls as
// the head learns (from about ln of the visible keys to well below it); the heads must exist.
TEST(TrainCli, AttentionLossesTrainTheNamedHeads) {
  TempDir dir;
  std::string cmd = TrainCommand(dir, "--previous-token-head 1.1");
  cmd.replace(cmd.find(" -q "), 4, " ");
  cmd.replace(cmd.find("--steps 12 --qat-steps 4"), 24, "--steps 40 --qat-steps 0");
  CommandResult r = cact::testing::Run(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<double> losses;
  for (size_t at = r.output.find("attention "); at != std::string::npos;
       at = r.output.find("attention ", at + 1))
    losses.push_back(NumberAfter(r.output.substr(at), "attention "));
  ASSERT_GE(losses.size(), 4u) << r.output;
  EXPECT_GT(losses.front(), 2.0) << r.output;
  EXPECT_LT(losses.back(), 0.5 * losses.front()) << r.output;
  for (const char* bad : {"2.0", "0.2", "0", "a.b", "0.0.0"}) {
    r = cact::testing::Run(TrainCommand(dir, std::string("--previous-token-head ") + bad));
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << bad << ": " << r.output;
  }
  // an induction head trains too (its loss is noisy over so few steps: the definition is
  // tested in needle_net_test.cc), and the heads and weight go into the model's metadata
  r = cact::testing::Run(TrainCommand(dir,
                                      "--previous-token-head 0.1 --induction-head 1.0 --copy-head "
                                      "1.1 --attention-loss-weight 0.5"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto st = ReadSafetensors(dir / "m.safetensors");
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->metadata["previous_token_heads"], "0.1");
  EXPECT_EQ(st->metadata["induction_heads"], "1.0");
  EXPECT_EQ(st->metadata["copy_heads"], "1.1");
  EXPECT_EQ(st->metadata["attention_loss_weight"], "0.5");
  for (const char* option : {"--previous-token-head", "--induction-head", "--copy-head"}) {
    r = cact::testing::Run(TrainCommand(dir, std::string(option) + " 2.0"));
    EXPECT_EQ(r.exit_code, 2) << option << ": " << r.output;
    EXPECT_NE(r.output.find("attention head 2.0: the model has 2 layers of 2 query heads"),
              std::string::npos)
        << option << ": " << r.output;
  }
}

TEST(TrainCli, BadInputFailsCleanly) {
  TempDir dir;
  CommandResult r = cact::testing::Run(TrainCommand(dir, "--geometry tiny,layers=0"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("geometry"), std::string::npos) << r.output;
  r = cact::testing::Run(Tool("cact-torch") + " train --text /nonexistent.txt -o " +
                         (dir / "x.cact"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("/nonexistent.txt"), std::string::npos) << r.output;
  // text files are taken as they are: the corpus normalisation switch does not apply
  r = cact::testing::Run(Tool("cact-torch") + " train --text " + Src("docs/engine.md") +
                         " --collapse-spaces -o " + (dir / "x.cact"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--collapse-spaces goes with --corpus or --manifest"), std::string::npos)
      << r.output;
  // a manifest whose file changed is refused, naming the line and the path
  std::filesystem::copy_file(Src("docs/engine.md"), dir / "doc.txt");
  const std::vector<uint8_t> bytes = ReadAll(dir / "doc.txt");
  std::ofstream(dir / "corpus.tsv") << "# cact corpus manifest v1\ntrain\t" << bytes.size() << "\t"
                                    << std::string(64, '0') << "\t" << (dir / "doc.txt") << "\n";
  r = cact::testing::Run(Tool("cact-torch") + " train --geometry tiny --manifest " +
                         (dir / "corpus.tsv") + " --seq 64 -o " + (dir / "y.cact"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("doc.txt"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "x.cact"));
  EXPECT_FALSE(std::filesystem::exists(dir / "y.cact"));
}

// finetune -> PEFT adapter -> cact-quant lora: the held-out target loss falls and the merge
// changes exactly the adapted projections.
TEST(FinetuneCli, AdapterTrainsAndMerges) {
  TempDir dir;
  ASSERT_EQ(cact::testing::Run(TrainCommand(dir, "")).exit_code, 0);
  std::ofstream jsonl(dir / "data.jsonl");
  const char* cities[] = {"Paris", "Oslo", "Lima", "Cairo", "Tokyo", "Perth", "Quito", "Seoul"};
  for (int i = 0; i < 40; ++i) {
    const std::string c = cities[i % 8];
    jsonl << R"({"query":"Weather in )" << c << R"(?","tools":[{"name":"get_weather"}],)"
          << R"("answers":[{"name":"get_weather","arguments":{"city":")" << c << R"("}}]})"
          << "\n";
  }
  jsonl.close();
  CommandResult ft = cact::testing::Run(
      Tool("cact-torch") + " finetune " + (dir / "m.cact") + " --data " + (dir / "data.jsonl") +
      " -o " + (dir / "adapter") + " --epochs 3 --batch 8 --lr 1e-2 --rank 4 --alpha 8 -t 1 -q");
  ASSERT_EQ(ft.exit_code, 0) << ft.output;
  const double before = NumberAfter(ft.output, "held-out target loss: ");
  const double after = NumberAfter(ft.output, "before, ");
  EXPECT_LT(after, before - 0.1) << ft.output;
  CommandResult merge =
      cact::testing::Run(Tool("cact-quant") + " lora " + (dir / "m.cact") + " --adapter " +
                         (dir / "adapter/adapter_model.safetensors") + " --adapter-config " +
                         (dir / "adapter/adapter_config.json") + " -o " + (dir / "merged.cact"));
  ASSERT_EQ(merge.exit_code, 0) << merge.output;
  CommandResult diff = cact::testing::Run(Tool("cact-inspect") + " diff " + (dir / "m.cact") + " " +
                                          (dir / "merged.cact"));
  ASSERT_NE(diff.exit_code, -1);
  for (const char* p : {"layer00.q_proj", "layer01.out_proj", "layer01.gate_proj"})
    EXPECT_NE(diff.output.find(p), std::string::npos) << p;
  EXPECT_EQ(diff.output.find("\"embedding\""), std::string::npos) << diff.output.substr(0, 2000);
}

// The official trainer's adapter options: --qat-bits is recorded in the adapter (PEFT
// metadata or the official pickle) and `cact-quant lora` deploys it; --format pickle writes
// what Python's pickle.load reads as the official dict, and it merges to exactly the file the
// same adapter in the PEFT layout gives (the layouts are transposes of each other); a
// projection that is zero in every layer is not adapted.
TEST(FinetuneCli, QatBitsAndTheOfficialPickle) {
  TempDir dir;
  ASSERT_EQ(cact::testing::Run(TrainCommand(dir, "")).exit_code, 0);
  // k_proj zero in every layer: the official lora_target_paths leaves such a target out.
  CommandResult dq = cact::testing::Run(Tool("cact-quant") + " dequant " + (dir / "m.cact") +
                                        " -o " + (dir / "w.safetensors"));
  ASSERT_EQ(dq.exit_code, 0) << dq.output;
  absl::StatusOr<Safetensors> w = ReadSafetensors(dir / "w.safetensors");
  ASSERT_TRUE(w.ok()) << w.status();
  for (FloatTensor& t : w->tensors)
    if (t.name.find("k_proj") != std::string::npos) std::fill(t.data.begin(), t.data.end(), 0.0f);
  ASSERT_TRUE(WriteSafetensors(dir / "z.safetensors", *w).ok());
  CommandResult b = cact::testing::Run(Tool("cact-quant") + " build -q --weights " +
                                       (dir / "z.safetensors") + " --base " + (dir / "m.cact") +
                                       " -o " + (dir / "z.cact"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  std::ofstream jsonl(dir / "data.jsonl");
  for (const char* c : {"Paris", "Oslo", "Lima", "Cairo", "Tokyo", "Perth", "Quito", "Seoul"})
    jsonl << R"({"query":"Weather in )" << c << R"(?","tools":[{"name":"get_weather"}],)"
          << R"("answers":[{"name":"get_weather","arguments":{"city":")" << c << R"("}}]})"
          << "\n";
  jsonl.close();
  auto finetune = [&](const std::string& flags, const std::string& out) {
    return cact::testing::Run(Tool("cact-torch") + " finetune " + (dir / "z.cact") + " --data " +
                              (dir / "data.jsonl") + " -o " + (dir / out) +
                              " --epochs 1 --batch 4 --lr 1e-2 --rank 2 --alpha 4 --seed 3 -t 1 -q " +
                              flags);
  };
  CommandResult pk = finetune("--qat-bits 4 --format pickle", "a.pkl");
  ASSERT_EQ(pk.exit_code, 0) << pk.output;
  EXPECT_NE(pk.output.find("k_proj: zero in every layer, not adapted"), std::string::npos)
      << pk.output;
  CommandResult peft = finetune("--qat-bits 4", "peft");
  ASSERT_EQ(peft.exit_code, 0) << peft.output;

  // Python's own unpickler sees the official structure.
  CommandResult py = cact::testing::Run(
      std::string(CACT_PYTHON) + " -c \"import pickle,sys; d=pickle.load(open(sys.argv[1],'rb')); "
      "print(list(d)); print(d['qat_bits'], d['qat_bits_map'], d['seed'], d['rank'], d['scale']); "
      "[print(k, list(v), v['A'].dtype, v['A'].shape, v['B'].shape) for k, v in d['lora'].items()]\" " +
      (dir / "a.pkl"));
  ASSERT_EQ(py.exit_code, 0) << py.output;
  EXPECT_NE(py.output.find("['lora', 'scale', 'base', 'rank', 'qat_bits', 'qat_bits_map', 'seed']"),
            std::string::npos)
      << py.output;
  EXPECT_NE(py.output.find("4 None 3 2 2.0"), std::string::npos) << py.output;
  EXPECT_NE(py.output.find("stack/layers/block/self_attn/q_proj/kernel ['A', 'B'] float32 (2, "),
            std::string::npos)
      << py.output;
  EXPECT_EQ(py.output.find("k_proj"), std::string::npos) << py.output;

  // Both layouts carry the metadata, and merge to the same bytes at W4.
  auto lora = [&](const std::string& adapter, const std::string& out) {
    return cact::testing::Run(Tool("cact-quant") + " lora --json " + (dir / "z.cact") +
                              " --adapter " + adapter + " -o " + (dir / out));
  };
  CommandResult from_pickle = lora(dir / "a.pkl", "p.cact");
  ASSERT_EQ(from_pickle.exit_code, 0) << from_pickle.output;
  EXPECT_EQ(nlohmann::json::parse(from_pickle.output)["scheme_source"],
            "the adapter's QAT metadata (qat_bits 4)");
  CommandResult from_peft = lora(dir / "peft", "q.cact");
  ASSERT_EQ(from_peft.exit_code, 0) << from_peft.output;
  EXPECT_EQ(ReadAll(dir / "p.cact"), ReadAll(dir / "q.cact"));

  // auto records the base's own widths (the merge keeps them); none records nothing.
  CommandResult autoq = finetune("", "auto");
  ASSERT_EQ(autoq.exit_code, 0) << autoq.output;
  CommandResult m = lora(dir / "auto", "auto.cact");
  ASSERT_EQ(m.exit_code, 0) << m.output;
  EXPECT_EQ(nlohmann::json::parse(m.output)["scheme_source"],
            "the adapter's QAT metadata (qat_bits_map)");
  CommandResult none = finetune("--qat-bits none --template v2.0.9", "none");
  ASSERT_EQ(none.exit_code, 0) << none.output;
  EXPECT_NE(none.output.find("template v2.0.9"), std::string::npos) << none.output;
  CommandResult n = lora(dir / "none", "none.cact");
  ASSERT_EQ(n.exit_code, 0) << n.output;
  EXPECT_EQ(nlohmann::json::parse(n.output)["scheme_source"], "base file widths");
  // The pickle never replaces an input.
  const std::vector<uint8_t> base_bytes = ReadAll(dir / "z.cact");
  CommandResult over = cact::testing::Run(
      Tool("cact-torch") + " finetune " + (dir / "z.cact") + " --data " + (dir / "data.jsonl") +
      " -o " + (dir / "z.cact") + " --format pickle --epochs 1 -t 1 -q");
  EXPECT_EQ(over.exit_code, 2) << over.output;
  EXPECT_EQ(ReadAll(dir / "z.cact"), base_bytes);
  for (const char* flags : {"--qat-bits 3", "--template v3", "--format npz"}) {
    CommandResult bad = finetune(flags, "bad");
    EXPECT_EQ(bad.exit_code, 2) << flags << bad.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "bad")) << flags;
  }
}

}  // namespace
}  // namespace cact::testing
