// The one `--tokens` syntax of cact-run and cact-torch (tools/common/token_list.h): what
// either tool accepted is accepted, and a bad item is named with its position.
#include <string>

#include "gtest/gtest.h"
#include "tools/common/exit_code.h"
#include "tools/common/token_list.h"

namespace cact::tools {
namespace {

std::vector<int32_t> Ids(std::string_view text) {
  auto ids = ParseTokenIds(text);
  EXPECT_TRUE(ids.ok()) << text << ": " << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

std::string Error(std::string_view text) {
  auto ids = ParseTokenIds(text);
  EXPECT_FALSE(ids.ok()) << text;
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument) << text;
  return std::string(ids.status().message());
}

TEST(TokenList, AcceptsTheUnionOfBothToolsSyntax) {
  EXPECT_EQ(Ids("2,17,40"), (std::vector<int32_t>{2, 17, 40}));
  EXPECT_EQ(Ids(" 2 , 17,\t40 "), (std::vector<int32_t>{2, 17, 40}));
  EXPECT_EQ(Ids("2,,17,"), (std::vector<int32_t>{2, 17}));
  EXPECT_EQ(Ids("+5,0"), (std::vector<int32_t>{5, 0}));
  EXPECT_EQ(Ids("2147483647"), (std::vector<int32_t>{2147483647}));
}

TEST(TokenList, NamesTheBadItemAndItsPosition) {
  EXPECT_EQ(Error("2,abc"), "--tokens: item 2 'abc' is not an integer token id");
  EXPECT_EQ(Error("2,17,-1"), "--tokens: item 3 '-1' is not a valid id (ids are 0..2^31-1)");
  EXPECT_EQ(Error("2147483648"),
            "--tokens: item 1 '2147483648' is not a valid id (ids are 0..2^31-1)");
  EXPECT_EQ(Error("1.5"), "--tokens: item 1 '1.5' is not an integer token id");
  EXPECT_EQ(Error("2 3"), "--tokens: item 1 '2 3' is not an integer token id");
  EXPECT_EQ(Error(""), "--tokens: no token ids");
  EXPECT_EQ(Error(" , ,"), "--tokens: no token ids");
}

TEST(ExitCode, InternalIsOneOtherErrorsTwo) {
  EXPECT_EQ(ExitCode(absl::OkStatus()), 0);
  EXPECT_EQ(ExitCode(absl::InternalError("x")), 1);
  EXPECT_EQ(ExitCode(absl::InvalidArgumentError("x")), 2);
  EXPECT_EQ(ExitCode(absl::DataLossError("x")), 2);
  EXPECT_EQ(ExitCode(absl::NotFoundError("x")), 2);
}

}  // namespace
}  // namespace cact::tools
