// cact-run from the command line on the official fixtures: logits and hidden states match
// the official decode (1e-4 x std, as the engine tests), window/sink flags, greedy
// generation is the argmax chain of the reference logits, the chat template agrees with the
// official renderer (Python oracle), --validate, timing report, and bad input exits 2.
#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/npy.h"
#include "nlohmann/json.hpp"
#include "support/test_support.h"

namespace cact {
namespace {

using testing::Fixture;
using testing::FixtureCases;
using testing::TempDir;
using testing::Tool;

struct Split {
  int exit_code;
  std::string out, err;
};

// Runs with stdout and stderr kept apart.
Split RunSplit(const std::string& args) {
  TempDir dir;
  const std::string err = dir / "stderr.txt";
  auto r = testing::Run("( " + Tool("cact-run") + " " + args + " 2>" + err + " )");
  const std::vector<uint8_t> e = testing::ReadAll(err);
  return {r.exit_code, r.output, std::string(e.begin(), e.end())};
}

std::vector<int32_t> Tokens(const std::string& kase, const std::string& seq) {
  std::ifstream f(Fixture(kase, "tokens_" + seq + ".json"));
  return nlohmann::json::parse(f).at("tokens").get<std::vector<int32_t>>();
}

std::string Join(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s.append(i ? "," : "").append(std::to_string(ids[i]));
  return s;
}

NpyArray Load(const std::string& path) {
  auto a = ReadNpy(path);
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? std::move(a).value() : NpyArray{};
}

double StdDev(const std::vector<float>& v) {
  double m = 0, s = 0;
  for (float x : v) m += x;
  m /= double(v.size());
  for (float x : v) s += (x - m) * (x - m);
  return std::sqrt(s / double(v.size()));
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

int32_t ArgmaxRow(const NpyArray& a, size_t row) {
  const size_t V = a.shape[1];
  int32_t best = 0;
  for (size_t i = 1; i < V; ++i)
    if (a.data[row * V + i] > a.data[row * V + best]) best = int32_t(i);
  return best;
}

class RunFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(RunFixture, LogitsMatchTheOfficialDecode) {
  const std::string kase = GetParam();
  for (const char* seq : {"s0", "s1", "s2"}) {
    TempDir dir;
    auto r = RunSplit(Fixture(kase, "model.cact") + " --ref --tokens " + Join(Tokens(kase, seq)) +
                      " --logits " + (dir / "l.npy"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    NpyArray got = Load(dir / "l.npy"),
             want = Load(Fixture(kase, std::string("logits_") + seq + ".npy"));
    EXPECT_EQ(got.shape, want.shape);
    EXPECT_LE(MaxAbsDiff(got.data, want.data), 1e-4 * StdDev(want.data)) << kase << " " << seq;
  }
}

TEST_P(RunFixture, WindowSinkLastAndHiddenDump) {
  const std::string kase = GetParam();
  TempDir dir;
  auto r = RunSplit(Fixture(kase, "model.cact") + " --ref --window 16 --sink 4 --tokens " +
                    Join(Tokens(kase, "s2")) + " --logits " + (dir / "l.npy") + " --dump-hidden " +
                    (dir / "hid"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  NpyArray want = Load(Fixture(kase, "logits_s2_w16p4.npy"));
  EXPECT_LE(MaxAbsDiff(Load(dir / "l.npy").data, want.data), 1e-4 * StdDev(want.data));
  NpyArray hid = Load(dir / "hid/hidden.npy"), hwant = Load(Fixture(kase, "hidden_s2_w16p4.npy"));
  EXPECT_EQ(hid.shape, hwant.shape);
  EXPECT_LE(MaxAbsDiff(hid.data, hwant.data), 1e-4 * StdDev(hwant.data));

  // --last: one row, the last one; the unwindowed default differs from the windowed run.
  auto last = RunSplit(Fixture(kase, "model.cact") + " --ref --window 0 --tokens " +
                       Join(Tokens(kase, "s2")) + " --logits " + (dir / "last.npy") + " --last");
  ASSERT_EQ(last.exit_code, 0) << last.err;
  NpyArray l = Load(dir / "last.npy"), full = Load(Fixture(kase, "logits_s2.npy"));
  ASSERT_EQ(l.shape, (std::vector<size_t>{1, full.shape[1]}));
  std::vector<float> want_last(full.data.end() - full.shape[1], full.data.end());
  EXPECT_LE(MaxAbsDiff(l.data, want_last), 1e-4 * StdDev(full.data));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RunFixture, ::testing::ValuesIn(FixtureCases()));

TEST(RunCli, GreedyGenerationIsTheArgmaxChain) {
  const std::string model = Fixture("odd", "model.cact");
  auto r = RunSplit(model + " --ref -p 'The GNU General Public License' -n 12 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto prompt = j.at("prompt_ids").get<std::vector<int32_t>>();
  const auto gen = j.at("generated_ids").get<std::vector<int32_t>>();
  ASSERT_FALSE(gen.empty());
  EXPECT_LE(gen.size(), 12u);
  EXPECT_EQ(prompt.front(), 2);  // BOS
  for (const char* key : {"open_ms", "load_ms", "tokenize_ms", "prefill_tokens_per_s",
                          "first_token_ms", "decode_tokens_per_s", "peak_rss_bytes"})
    EXPECT_TRUE(j.at("timings").contains(key)) << key;
  EXPECT_GT(j.at("timings").at("peak_rss_bytes").get<uint64_t>(), 0u);

  // Feed prompt + generated tokens and check each generated id is the argmax of the row
  // before it (the generation loop adds nothing but the greedy choice).
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), gen.begin(), gen.end());
  TempDir dir;
  auto f = RunSplit(model + " --ref --tokens " + Join(all) + " --logits " + (dir / "l.npy"));
  ASSERT_EQ(f.exit_code, 0) << f.err;
  NpyArray l = Load(dir / "l.npy");
  for (size_t i = 0; i < gen.size(); ++i)
    EXPECT_EQ(gen[i], ArgmaxRow(l, prompt.size() - 1 + i)) << "generated token " << i;

  // Same run twice: same output; streaming mode prints the text and the timing line.
  auto text = RunSplit(model + " --ref -p 'The GNU General Public License' -n 12");
  ASSERT_EQ(text.exit_code, 0);
  EXPECT_EQ(text.out, j.at("text").get<std::string>() + "\n");
  for (const char* key :
       {"load", "tokenize", "prompt", "prefill", "tok/s", "first token", "decode", "peak RSS"})
    EXPECT_NE(text.err.find(key), std::string::npos) << key << " in " << text.err;
}

// The fixtures mostly predict a copy of the last token, so a prompt ending in EOS (id 1)
// makes greedy generation stop at once; --ignore-eos keeps going to -n.
TEST(RunCli, IgnoreEosGeneratesToTheLimit) {
  const std::string model = Fixture("tiny", "model.cact");
  auto stop = RunSplit(model + " --ref --tokens 2,17,1 -n 6 --json");
  ASSERT_EQ(stop.exit_code, 0) << stop.err;
  ASSERT_TRUE(nlohmann::json::parse(stop.out).at("generated_ids").empty())
      << "precondition: greedy generation stops at EOS here";
  auto go = RunSplit(model + " --ref --tokens 2,17,1 -n 6 --ignore-eos --json");
  ASSERT_EQ(go.exit_code, 0) << go.err;
  const auto j = nlohmann::json::parse(go.out);
  EXPECT_EQ(j.at("generated_ids").size(), 6u);
  EXPECT_EQ(j.at("generated_ids")[0].get<int32_t>(), 1);  // EOS kept as a token
  const auto& t = j.at("timings");
  EXPECT_GT(t.at("open_ms").get<double>(), 0.0);
  EXPECT_GE(t.at("load_ms").get<double>(), t.at("open_ms").get<double>());  // open is part of load
}

// -t defaults to the CPUs the process may use, at most the model's KV heads, on the fast
// path and to 1 on the reference; an explicit -t wins; the count is reported. Oracles:
// `nproc` (which reads the same affinity mask), run under taskset when it is available to
// pin a known count, and the KV heads as cact-inspect reads them from the header.
TEST(RunCli, ThreadsDefaultToTheAvailableCpusAtMostTheKvHeadsOnTheFastPath) {
  const std::string model = Fixture("tiny", "model.cact");
  auto nproc = testing::Run("nproc");
  ASSERT_EQ(nproc.exit_code, 0);
  const int cpus = std::stoi(nproc.output);
  auto inspect = testing::Run(testing::Tool("cact-inspect") + " " + model + " --json 2>/dev/null");
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
  const int kv_heads = nlohmann::json::parse(inspect.output).at("header").at("num_kv_heads");
  auto fast = RunSplit(model + " --tokens 2,17 -n 2 --json");
  ASSERT_EQ(fast.exit_code, 0) << fast.err;
  EXPECT_EQ(nlohmann::json::parse(fast.out).at("threads").get<int>(), std::min(cpus, kv_heads));
  auto ref = RunSplit(model + " --ref --tokens 2,17 -n 2 --json");
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  EXPECT_EQ(nlohmann::json::parse(ref.out).at("threads").get<int>(), 1);
  auto explicit_t = RunSplit(model + " --ref --tokens 2,17 -n 2 -t 3 --json");
  ASSERT_EQ(explicit_t.exit_code, 0) << explicit_t.err;
  EXPECT_EQ(nlohmann::json::parse(explicit_t.out).at("threads").get<int>(), 3);
  if (testing::Run("command -v taskset").exit_code == 0) {
    auto pinned = testing::Run("( taskset -c 0 " + testing::Tool("cact-run") + " " + model +
                               " --tokens 2,17 -n 2 --json 2>/dev/null )");
    ASSERT_EQ(pinned.exit_code, 0) << pinned.output;
    EXPECT_EQ(nlohmann::json::parse(pinned.output).at("threads").get<int>(), 1);
  }
}

TEST(RunCli, ChatTemplateMatchesTheOfficialRendererAndPinsTheTools) {
  TempDir dir;
  const std::string tools = dir / "tools.json";
  const std::string decl =
      "[{\"name\": \"get_weather\", \"description\": \"Weather for a city\",\n"
      "  \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": "
      "\"string\"}}}}]";
  testing::WriteAll(tools, std::vector<uint8_t>(decl.begin(), decl.end()));
  const std::string query = "What is the weather in Paris?";
  testing::WriteAll(dir / "query.txt", std::vector<uint8_t>(query.begin(), query.end()));
  auto oracle = testing::Run(testing::Python() + " " + CACT_SOURCE_DIR +
                             "/tests/engine/chat_oracle.py " + Fixture("tiny", "tokenizer.model") +
                             " " + tools + " " + (dir / "query.txt") + " - " + (dir / "want.json"));
  ASSERT_EQ(oracle.exit_code, 0) << oracle.output;
  std::ifstream wf(dir / "want.json");
  const auto want = nlohmann::json::parse(wf);

  auto r = RunSplit(Fixture("tiny", "model.cact") + " --ref --tools " + tools + " --query '" +
                    query + "' -n 8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("prompt_ids"), want.at("ids"));
  EXPECT_EQ(j.at("sink"), want.at("tools_prefix"));  // tool declarations pinned by default
  EXPECT_EQ(j.at("window"), 256);                    // header kv_window
  auto w = RunSplit(Fixture("tiny", "model.cact") + " --ref --tools " + tools +
                    " --query x --sink 3 --window 9 --json");
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_EQ(nlohmann::json::parse(w.out).at("sink"), 3);
  EXPECT_EQ(nlohmann::json::parse(w.out).at("window"), 9);
}

// --template picks the release of the chat template: v2.0.9 prints the tools with
// ensure_ascii (json.dumps' default) and keeps the system text as given. The prompt ids of
// each against Python's rendering with libsentencepiece.
TEST(RunCli, TemplateFlagSelectsTheChatTemplate) {
  TempDir dir;
  const std::string tools = dir / "tools.json";
  const std::string decl = R"([{"name": "get_weather", "description": "Wetter in Zürich 😀"}])";
  testing::WriteAll(tools, std::vector<uint8_t>(decl.begin(), decl.end()));
  const std::string oracle =
      "import json, sys\n"
      "import sentencepiece as spm\n"
      "sp = spm.SentencePieceProcessor(model_file=sys.argv[1])\n"
      "tools = json.load(open(sys.argv[2], encoding='utf-8'))\n"
      "ascii, system = sys.argv[3] == 'v2.0.9', sys.argv[4]\n"
      "system = system if ascii else system.strip()\n"
      "text = ('<|im_start|>system\\n' + system + '<|im_end|>\\n') if system else ''\n"
      "text += ('<|im_start|>user\\n<tools>' + json.dumps(tools, separators=(',', ':'),\n"
      "         ensure_ascii=ascii) + '</tools>\\nhi<|im_end|>\\n<|im_start|>assistant\\n')\n"
      "print(json.dumps([2] + sp.encode(text)))\n";
  testing::WriteAll(dir / "oracle.py", std::vector<uint8_t>(oracle.begin(), oracle.end()));
  const std::string model = Fixture("tiny", "model.cact");
  auto ids = [&](const std::string& flag, const std::string& name, const std::string& system) {
    auto want = testing::Run(testing::Python() + " " + (dir / "oracle.py") + " " +
                             Fixture("tiny", "tokenizer.model") + " " + tools + " " + name + " '" +
                             system + "'");
    EXPECT_EQ(want.exit_code, 0) << want.output;
    nlohmann::json got;
    // Both ways a tools prompt is rendered: path validation and tool-call decoding.
    for (const char* mode : {" --validate -n 1", " -n 16"}) {
      auto r = RunSplit(model + " --tools " + tools + " --query hi --system '" + system + "'" +
                        mode + " --json" + flag);
      EXPECT_EQ(r.exit_code, 0) << r.err;
      got = nlohmann::json::parse(r.out).at("prompt_ids");
      EXPECT_EQ(got, nlohmann::json::parse(want.output)) << name << flag << mode;
    }
    return got;
  };
  const auto by_default = ids("", "v2.0.12", " sys ");
  EXPECT_EQ(ids(" --template v2.0.12", "v2.0.12", " sys "), by_default);
  EXPECT_NE(ids(" --template v2.0.9", "v2.0.9", " sys "), by_default);
  ids(" --template v2.0.9", "v2.0.9", "");

  auto help = RunSplit("--help");
  EXPECT_NE(help.out.find("--template"), std::string::npos);
  EXPECT_NE(help.out.find("=v2.0.12"), std::string::npos) << "the default is named";
  // A bad name: one line, exit 2 (eval too).
  for (const std::string& args : {model + " --template v3 --tools " + tools + " --query hi",
                                  "eval " + model + " -f " + tools + " --template v3"}) {
    auto r = RunSplit(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("--template: unknown chat template \"v3\" (accepted: v2.0.12, v2.0.9)"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.out, "") << args;
  }
}

// Limits past max_seq_len are refused when given; a default adapts (validate's 64 steps stop
// at the end of the context).
TEST(RunCli, LengthsPastTheModelAreRefusedDefaultsAdapt) {
  const std::string model = Fixture("tiny", "model.cact");
  const uint32_t max = 256;  // the tiny fixture's max_seq_len (case.json)
  std::string ids;
  for (uint32_t i = 0; i < max - 6; ++i) {
    if (i) ids += ',';
    ids += std::to_string(2 + i % 300);
  }
  auto def = RunSplit(model + " --validate --ref --tokens " + ids + " --json");
  ASSERT_EQ(def.exit_code, 0) << def.err;
  EXPECT_EQ(nlohmann::json::parse(def.out).at("validation").at("positions"), max);
  auto given = RunSplit(model + " --validate --ref --tokens " + ids + " -n 64");
  EXPECT_EQ(given.exit_code, 2) << given.err;
  EXPECT_NE(given.err.find("cact-run: -n (decode steps) 64: the prompt's 250 tokens and 64 more "
                           "need 314 positions, the model has 256 (max_seq_len); at most 6 fit"),
            std::string::npos)
      << given.err;
  auto gen = RunSplit(model + " --ref --tokens " + ids + " -n 8");
  EXPECT_EQ(gen.exit_code, 2) << gen.err;
  EXPECT_NE(gen.err.find("at most 7 fit"), std::string::npos) << gen.err;
  EXPECT_EQ(RunSplit(model + " --ref --tokens " + ids + " -n 7").exit_code, 0);
}

TEST(RunCli, ValidateReportsAndExits) {
  const std::string model = Fixture("odd", "model.cact");
  auto ok =
      RunSplit(model + " --validate --path ref --tokens " + Join(Tokens("odd", "s0")) + " -n 8");
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  for (const char* key :
       {"layer  0 hidden rel-L2", "logits rel-L2", "top-1 agreement", "KL divergence", "PASS"})
    EXPECT_NE(ok.out.find(key), std::string::npos) << key << " in " << ok.out;
  auto j = RunSplit(model + " --validate --ref --tokens 2,5,9 -n 3 --json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto v = nlohmann::json::parse(j.out).at("validation");
  EXPECT_EQ(v.at("positions"), 6);
  EXPECT_EQ(v.at("pass"), true);
  // A bound the fast path cannot meet (exactly the reference's logits) fails with exit 1.
  auto fail = RunSplit(model + " --validate --tokens 2,5,9 --max-rel-l2 0 --max-kl-mean 0");
  EXPECT_EQ(fail.exit_code, 1) << fail.out << fail.err;
  EXPECT_NE(fail.out.find("FAIL"), std::string::npos);
  // A bound outside its range is a bad command line (a fraction, not a percentage).
  auto range = RunSplit(model + " --validate --ref --tokens 2,5,9 --min-top1 1.5");
  EXPECT_EQ(range.exit_code, 2) << range.err;
  EXPECT_NE(range.err.find("cact-run: --min-top1: must be finite and in [0, 1]"),
            std::string::npos)
      << range.err;
}

TEST(RunCli, ProbeHeads) {
  auto r = RunSplit(Fixture("odd", "model.cact") + " --ref --tokens " + Join(Tokens("odd", "s2")) +
                    " --probes --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto p = nlohmann::json::parse(r.out).at("probes");
  const auto emb = p.at("retrieval").get<std::vector<double>>();
  ASSERT_EQ(emb.size(), 32u);
  double n2 = 0;
  for (double v : emb) n2 += v * v;
  EXPECT_NEAR(n2, 1.0, 1e-5);
  EXPECT_TRUE(p.contains("confidence"));
}

TEST(RunCli, BadInputExitsTwoWithOneClearLine) {
  TempDir dir;
  const std::string model = Fixture("tiny", "model.cact");
  const std::string bad_json = dir / "bad.json";
  const std::string text = "[{\"name\": \"f\",]";
  testing::WriteAll(bad_json, std::vector<uint8_t>(text.begin(), text.end()));
  std::vector<uint8_t> bytes = testing::ReadAll(model);
  bytes.resize(bytes.size() / 2);
  testing::WriteAll(dir / "truncated.cact", bytes);
  std::string too_long = "2";
  for (int i = 0; i < 256; ++i) too_long += ",7";  // max_seq_len is 256 in both fixtures

  struct Case {
    std::string args, needle;
  };
  const std::vector<Case> cases = {
      {model + " --tokens 2,512", "not a valid id"},
      {model + " --tokens 2,-1", "not a valid id"},
      {model + " --tokens 2,abc", "not an integer"},
      {model + " --tokens " + too_long, "max_seq_len"},
      {model + " --tools " + bad_json + " --query hi", "malformed"},
      {model + " --tools " + (dir / "missing.json") + " --query hi", "cannot read"},
      {model + " --tools " + bad_json, "go together"},
      {model, "no prompt"},
      {model + " --tokens 2 -p hi", "only one"},
      {dir / "truncated.cact --tokens 2", "truncated.cact"},
      {dir / "nothing.cact --tokens 2", "nothing.cact"},
      {model + " --bogus-flag", ""},
  };
  for (const Case& c : cases) {
    auto r = RunSplit(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << c.args;
  }
}

}  // namespace
}  // namespace cact
