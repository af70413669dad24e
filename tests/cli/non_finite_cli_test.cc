// Finite or refused, from the command line: a model with one NaN FP16 value or one +Inf CQ
// group norm is listed by verify (exit 1), refused by every command that computes with it
// (exit 2, one line), and shown by diff; the offsets are computed here from the directory,
// independently of the checker.
#include <cstdint>
#include <filesystem>

#include "formats/cact/cact_file.h"
#include "gtest/gtest.h"
#include "support/test_support.h"

namespace cact {
namespace {

using testing::Fixture;
using testing::Newlines;
using testing::ReadAll;
using testing::TempDir;
using testing::Tool;
using testing::WriteAll;

struct Damaged {
  std::string path, tensor, where;  // `where`: "element 3 at byte 1234 is NaN"
};

// A copy of the tiny fixture with the two bytes at `tensor`'s blob offset + `at` (from the
// end when negative) set to `lo hi`.
Damaged Damage(const TempDir& dir, const std::string& name, const std::string& tensor, int64_t at,
               uint8_t lo, uint8_t hi) {
  const std::string src = Fixture("tiny", "model.cact");
  absl::StatusOr<CactFile> f = CactFile::Open(src);
  EXPECT_TRUE(f.ok()) << f.status();
  const TensorEntry* t = f->Find(tensor);
  EXPECT_NE(t, nullptr) << tensor;
  const uint64_t byte = at >= 0 ? t->record.offset + uint64_t(at)
                                : t->record.offset + t->record.nbytes - uint64_t(-at);
  std::vector<uint8_t> bytes = ReadAll(src);
  bytes[byte] = lo;
  bytes[byte + 1] = hi;
  WriteAll(dir / name, bytes);
  std::string where;
  if (t->is_cq()) {
    const uint64_t groups = t->rows() * ((t->cols() + t->record.group - 1) / t->record.group);
    where = "tensor '" + tensor + "' (record " + std::to_string(t->index) + ") norm of group " +
            std::to_string(groups - 1) + " at byte " + std::to_string(byte) + " is +Inf";
  } else {
    where = "tensor '" + tensor + "' (record " + std::to_string(t->index) + ") element " +
            std::to_string(at / 2) + " at byte " + std::to_string(byte) + " is NaN";
  }
  return {dir / name, tensor, where};
}

class NonFinite : public ::testing::Test {
 protected:
  void SetUp() override {
    cases_ = {Damage(dir_, "nan.cact", "layer01.post_norm", 6, 0xff, 0x7f),
              Damage(dir_, "inf.cact", "layer01.q_proj", -2, 0x00, 0x7c)};
  }
  TempDir dir_;
  std::vector<Damaged> cases_;
};

TEST_F(NonFinite, VerifyListsTheValueAndFails) {
  for (const Damaged& d : cases_) {
    auto r = testing::Run(Tool("cact-inspect") + " verify " + d.path);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("non-finite: " + d.where), std::string::npos)
        << "want: " << d.where << "\n" << r.output;
    EXPECT_NE(r.output.find("FAIL " + d.path + ": 1 non-finite value"), std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("OK "), std::string::npos) << r.output;
  }
  auto ok = testing::Run(Tool("cact-inspect") + " verify " + Fixture("tiny", "model.cact"));
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("every value finite"), std::string::npos) << ok.output;
}

TEST_F(NonFinite, EveryComputingCommandRefusesTheModel) {
  for (const Damaged& d : cases_) {
    const std::string text = Fixture("tiny", "case.json");
    for (const std::string& cmd : {
             Tool("cact-run") + " " + d.path + " --tokens 2,5,7 -n 4",
             Tool("cact-run") + " " + d.path + " --tokens 2,5,7 --validate",
             Tool("cact-run") + " perplexity " + d.path + " -f " + text + " -q",
             Tool("cact-run") + " compare " + Fixture("tiny", "model.cact") + " " + d.path +
                 " -f " + text + " -q",
             Tool("cact-quant") + " requant " + d.path + " --preset cq4 -q -o " +
                 (dir_ / "out.cact"),
             Tool("cact-quant") + " dequant " + d.path + " -o " + (dir_ / "out.safetensors"),
         }) {
      auto r = testing::Run(cmd);
      EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.output;
      EXPECT_EQ(Newlines(r.output), 1u) << cmd << "\n" << r.output;
      EXPECT_NE(r.output.find(d.where), std::string::npos) << cmd << "\n" << r.output;
      EXPECT_NE(r.output.find("a non-finite model is refused"), std::string::npos) << r.output;
    }
    EXPECT_FALSE(std::filesystem::exists(dir_ / "out.cact"));
    EXPECT_FALSE(std::filesystem::exists(dir_ / "out.safetensors"));
  }
}

TEST_F(NonFinite, DumpWritesNoNonFiniteValue) {
  for (const Damaged& d : cases_) {
    auto r = testing::Run(Tool("cact-inspect") + " dump " + d.path + " --tensor " + d.tensor +
                          " -o " + (dir_ / "t.npy"));
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("refusing to write a non-finite value"), std::string::npos)
        << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir_ / "t.npy"));
  }
}

TEST_F(NonFinite, DiffShowsTheNaNDifference) {
  for (const Damaged& d : cases_) {
    auto r = testing::Run(Tool("cact-inspect") + " diff " + Fixture("tiny", "model.cact") + " " +
                          d.path);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("NaN ("), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find(" 0 "), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace cact
