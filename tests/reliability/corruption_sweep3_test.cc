// The corruption sweeps of corruption_sweep_test.cc and cli_corruption_test.cc on a small
// generation-3 file (three layers, QKV taps, two engram sites, an embedding and a router
// head, CQ2/CQ3/CQ4): every truncation length and seeded bit flips give either a clean
// one-line format error naming the file, a field and an offset inside the input, or a file
// whose every blob, value and tokenizer can be read; through cact-inspect, exit 0 or 2 with
// one line (verify: 0 or 1), never a signal.
#include <gtest/gtest.h>

#include <omp.h>

#include <chrono>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "formats/cact/cact3_file.h"
#include "reliability/allocation_probe.h"
#include "reliability/reliability_util.h"
#include "support/needle3_synthetic.h"
#include "support/test_support.h"

namespace cact {
namespace {

using reliability::DamageRange;
using reliability::kMaxSecondsPerOpen;
using reliability::OpenOutcome;

uint32_t SweepBits(const std::string& name) {
  if (name == "embedding" || name.find("k_proj") != std::string::npos) return 4;
  if (name.find("q_proj") != std::string::npos) return 3;
  return 2;
}

std::vector<uint8_t> SweepFile() {
  testing::Synth3Options o;
  o.group = 32;
  o.bits = SweepBits;
  o.layout.heads = {testing::Head3(ProbeHead3::kEmbedding, 2, 2, 16),
                    testing::Head3(ProbeHead3::kRouter, 2, 3, 3)};
  return testing::SynthesizeCact3(o);
}

// Opened as generation 3; an accepted file is read through its generation-neutral records.
OpenOutcome OpenDamaged3(std::span<const uint8_t> bytes, const std::string& name,
                         DamageRange damage = {}) {
  return reliability::OpenDamaged<Cact3File>(bytes, name, damage);
}

struct Tally {
  uint64_t opens = 0, accepted = 0, rejected = 0, failures = 0;
  std::set<std::string> fields;
  void Add(const OpenOutcome& o, const std::string& what) {
    ++opens;
    (o.accepted ? accepted : rejected)++;
    if (!o.accepted) {
      const size_t a = o.message.find(": "), b = o.message.find(" at offset ");
      if (a != std::string::npos && b != std::string::npos && b > a) {
        std::string field = o.message.substr(a + 2, b - a - 2);
        if (field.rfind("record ", 0) == 0) field = "record " + field.substr(field.find(") ") + 2);
        fields.insert(field);
      }
    }
    if (!o.problem.empty() || o.seconds > kMaxSecondsPerOpen)
      if (++failures <= 10) ADD_FAILURE() << what << ": " << o.problem << " " << o.seconds << " s";
  }
};

class CorruptionSweep3 : public ::testing::Test {
 protected:
  void SetUp() override {
    omp_set_num_threads(1);
    bytes_ = SweepFile();
    OpenOutcome o = OpenDamaged3(bytes_, name_);
    ASSERT_TRUE(o.accepted) << o.message;
    ASSERT_EQ(o.problem, "");
    auto f = Cact3File::FromBytes(FileBytes::FromBuffer(name_, bytes_));
    ASSERT_TRUE(f.ok());
    metadata_end_ = f->tensors().front().record.offset;
    tokenizer_begin_ = f->tensors().back().record.offset;
  }
  std::vector<uint8_t> bytes_;
  const std::string name_ = "n3.cact";
  uint64_t metadata_end_ = 0, tokenizer_begin_ = 0;
};

// Every proper prefix is rejected (under ASan: every length of the metadata and a stride).
TEST_F(CorruptionSweep3, EveryTruncationLengthIsACleanError) {
  Tally tally;
  const uint64_t stride = reliability::kAddressSanitizer ? 13 : 1;
  for (uint64_t len = 0; len < bytes_.size(); ++len) {
    if (len > metadata_end_ && len < tokenizer_begin_ && len % stride) continue;
    OpenOutcome o = OpenDamaged3(std::span(bytes_.data(), len), name_);
    if (o.accepted) {
      ADD_FAILURE() << "a " << len << "-byte prefix validated";
      continue;
    }
    tally.Add(o, "truncated to " + std::to_string(len));
  }
  EXPECT_EQ(tally.failures, 0u);
  // header, codebook, directory, record offset, tokenizer: several places catch truncation.
  EXPECT_GE(tally.fields.size(), 4u);
}

TEST_F(CorruptionSweep3, SeededBitFlipsAreCleanErrorsOrReadableFiles) {
  const int flips = reliability::kAddressSanitizer ? 1000 : 5000;
  std::mt19937_64 rng(20270303);
  Tally uniform, metadata, tokenizer;
  auto flip = [&](uint64_t pos, int bit, Tally* t) {
    bytes_[pos] ^= uint8_t(1u << bit);
    OpenOutcome o = OpenDamaged3(bytes_, name_, {pos, pos + 1});
    bytes_[pos] ^= uint8_t(1u << bit);
    t->Add(o, "bit " + std::to_string(bit) + " of byte " + std::to_string(pos));
  };
  for (int i = 0; i < flips; ++i) {
    flip(rng() % bytes_.size(), int(rng() % 8), &uniform);
    flip(rng() % metadata_end_, int(rng() % 8), &metadata);
    flip(tokenizer_begin_ + rng() % (bytes_.size() - tokenizer_begin_), int(rng() % 8), &tokenizer);
  }
  EXPECT_EQ(uniform.failures + metadata.failures + tokenizer.failures, 0u);
  EXPECT_GT(uniform.accepted, uint64_t(flips / 2));
  EXPECT_GT(metadata.rejected, uint64_t(flips / 2));
  EXPECT_GT(tokenizer.rejected, 0u);
  EXPECT_GE(metadata.fields.size(), 10u);  // header fields, records, heads, permutations
}

TEST_F(CorruptionSweep3, TrailingBytesAreACleanError) {
  Tally tally;
  for (size_t extra : {1, 63, 64, 4096}) {
    std::vector<uint8_t> b = bytes_;
    b.resize(b.size() + extra, 0);
    OpenOutcome o = OpenDamaged3(b, name_, {bytes_.size(), b.size()});
    EXPECT_FALSE(o.accepted) << extra;
    tally.Add(o, std::to_string(extra) + " trailing bytes");
  }
  EXPECT_EQ(tally.failures, 0u);
}

// The same damage through cact-inspect: exit 0 when the library accepts the file, else exit
// 2 and one line carrying the library's message; verify exits 0 or 1 with one line.
TEST_F(CorruptionSweep3, ThroughTheCliExitZeroOrTwoWithOneLine) {
  ASSERT_TOOL_BUILT("cact-inspect");
  testing::TempDir dir;
  std::mt19937_64 rng(5150);
  std::vector<std::vector<uint8_t>> damaged;
  for (uint64_t len : {uint64_t(0), uint64_t(3), uint64_t(195), uint64_t(300), metadata_end_ - 1,
                       tokenizer_begin_ + 10, uint64_t(bytes_.size() - 1)})
    damaged.emplace_back(bytes_.begin(), bytes_.begin() + len);
  for (int i = 0; i < 16; ++i) {
    std::vector<uint8_t> b = bytes_;
    b[i % 2 ? rng() % metadata_end_ : rng() % b.size()] ^= uint8_t(1u << (rng() % 8));
    damaged.push_back(b);
  }
  int rejected = 0;
  for (size_t k = 0; k < damaged.size(); ++k) {
    const std::string path = dir / absl::StrCat("d", k, ".cact");
    testing::WriteAll(path, damaged[k]);
    rejected += !Cact3File::Open(path).ok();
    reliability::CheckInspectCli(path, path);
  }
  EXPECT_GT(rejected, 10);
}

}  // namespace
}  // namespace cact
