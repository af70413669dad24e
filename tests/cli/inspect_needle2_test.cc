// cact-inspect on the synthetic needle2 model: the accounting must print the numbers of the
// spec's "Released file, measured" table for every class that does not depend on the
// tokenizer.
#include <algorithm>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "support/test_support.h"

namespace cact {
namespace {

TEST(InspectNeedle2, AccountingMatchesTheReleasedFile) {
  testing::TempDir tmp;
  auto synth = testing::Run(testing::Tool("cact-quant") +
                            " synth --geometry needle2 --seed 1 -q -o " + tmp / "n2.cact");
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  auto r =
      testing::Run(testing::Tool("cact-inspect") + " --json " + tmp / "n2.cact" + " 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  auto& acc = j["accounting"];
  EXPECT_EQ(j["header"]["num_tensors"], 405);
  EXPECT_EQ(j["scheme"], "embedding=4,mhc=4,default=2");
  EXPECT_EQ(acc["classes"]["CQ2"]["tensors"], 141);
  EXPECT_EQ(acc["classes"]["CQ2"]["params"], 37748736);
  EXPECT_EQ(acc["classes"]["CQ2"]["bytes"], 10027008);
  EXPECT_EQ(acc["classes"]["CQ4"]["tensors"], 4);
  EXPECT_EQ(acc["classes"]["CQ4"]["params"], 5521408);
  EXPECT_EQ(acc["classes"]["CQ4"]["bytes"], 2846976);
  EXPECT_EQ(acc["classes"]["FP16"]["tensors"], 259);
  EXPECT_EQ(acc["classes"]["FP16"]["params"], 364279);
  EXPECT_EQ(acc["classes"]["FP16"]["bytes"], 728558);
  EXPECT_EQ(acc["params"], 43634423);
  EXPECT_EQ(acc["norm_bytes"], 676096);
  EXPECT_NEAR(acc["code_weighted_bits"].get<double>(), 2.255206, 5e-7);
  EXPECT_NEAR(acc["payload_bpw"].get<double>(), 2.493910, 5e-7);
  // The human table prints the same figures.
  auto text = testing::Run(testing::Tool("cact-inspect") + " " + tmp / "n2.cact");
  EXPECT_NE(text.output.find("37,748,736"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("2.255206 bits"), std::string::npos);
  EXPECT_NE(text.output.find("2.493910 bpw"), std::string::npos);
  // The first screen is a summary that fits a terminal: size, checksum, parameters and bits
  // per weight first, numbers with thousands separators, no raw codebook floats.
  const size_t lines = size_t(std::count(text.output.begin(), text.output.end(), '\n'));
  EXPECT_LE(lines, 40u) << text.output;
  const std::string top = text.output.substr(0, text.output.find("\nscheme"));
  EXPECT_NE(top.find("sha256 "), std::string::npos) << top;
  EXPECT_NE(top.find("parameters  43,634,423 (43,270,144 CQ-coded), "), std::string::npos)
      << top;
  EXPECT_NE(top.find(" bits per weight for the whole file"), std::string::npos) << top;
  EXPECT_EQ(text.output.find("CQ2  ["), std::string::npos) << text.output;
}

}  // namespace
}  // namespace cact
