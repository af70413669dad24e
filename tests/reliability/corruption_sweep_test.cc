// Deterministic corruption sweeps over the official fixtures: every truncation length and
// seeded random bit flips must give either a clean format error (one line naming the file,
// a field and an offset inside the input) or a file that validates and whose every blob,
// value and tokenizer can be read. A crash, hang or out-of-bounds read fails the test (run
// it under tests/sanitize.sh to have ASan/UBSan watch the reads).
#include <gtest/gtest.h>

#include <omp.h>

#include <cctype>
#include <cstdlib>
#include <map>
#include <random>

#include "formats/cact/cact_file.h"
#include "reliability/reliability_util.h"
#include "support/test_support.h"

namespace cact {
namespace {

using reliability::kMaxSecondsPerOpen;
using reliability::OpenDamaged;
using reliability::OpenOutcome;
using testing::Fixture;
using testing::ReadAll;

// Under ASan an open costs about 1 ms (the exactly sized heap copy), so the full sweeps take
// minutes per fixture: there the truncation sweep samples (every length in the header,
// codebook, directory and tokenizer, every length near each blob's start and end, a fixed
// stride through the payload) and the bit-flip sweep runs the first kSanitizerFlips of the
// same seeded sequence. Release builds run everything, as does CACT_FULL_SWEEP=1 under
// ASan; CACT_FULL_SWEEP=0 takes the sample in any build (docs/reliability.md).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif
constexpr uint64_t kEdgeBytes = 16;  // every length within this of a blob's start and end
constexpr uint64_t kPayloadStride = 61;
constexpr int kFullFlips = 10000, kSanitizerFlips = 2000;

bool FullSweep() {
  const char* env = std::getenv("CACT_FULL_SWEEP");
  if (env != nullptr && std::string(env) == "1") return true;
  if (env != nullptr && std::string(env) == "0") return false;
  return !kSanitized;
}

struct SweepTally {
  uint64_t opens = 0, accepted = 0, rejected = 0, failures = 0;
  std::map<std::string, uint64_t> fields;  // rejected count per error field (for the record)
  double max_seconds = 0;

  void Add(const OpenOutcome& o, const std::string& what) {
    ++opens;
    (o.accepted ? accepted : rejected)++;
    max_seconds = std::max(max_seconds, o.seconds);
    if (!o.accepted) {
      const size_t a = o.message.find(": "), b = o.message.find(" at offset ");
      std::string field = (a != std::string::npos && b != std::string::npos && b > a)
                              ? o.message.substr(a + 2, b - a - 2)
                              : "?";
      // Group "record 17 (layer01.k_proj) nbytes" as "record nbytes", numbers as N.
      if (field.rfind("record ", 0) == 0 && field.find(") ") != std::string::npos)
        field = "record " + field.substr(field.find(") ") + 2);
      std::string grouped;
      for (char c : field)
        if (!std::isdigit(static_cast<unsigned char>(c)))
          grouped += c;
        else if (grouped.empty() || grouped.back() != 'N')
          grouped += 'N';
      fields[grouped]++;
    }
    if (!o.problem.empty() || o.seconds > kMaxSecondsPerOpen) {
      if (++failures <= 10)
        ADD_FAILURE() << what << ": "
                      << (o.problem.empty() ? "took " + std::to_string(o.seconds) + " s"
                                            : o.problem);
    }
  }
  std::string Summary() const {
    std::string s = std::to_string(opens) + " opens, " + std::to_string(accepted) + " accepted, " +
                    std::to_string(rejected) + " rejected, max " +
                    std::to_string(max_seconds * 1e3) + " ms; rejections by field:";
    for (const auto& [f, n] : fields) s += " [" + f + "] " + std::to_string(n) + ";";
    return s;
  }
};

class CorruptionSweep : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    omp_set_num_threads(1);  // one decode at a time: the sweep is about bounds, not speed
    bytes_ = ReadAll(Fixture(GetParam(), "model.cact"));
    ASSERT_GT(bytes_.size(), 100000u) << "fixture missing: " << Fixture(GetParam(), "model.cact");
    name_ = GetParam() + "/model.cact";
    // The undamaged file must validate and be fully readable (else the sweep means nothing).
    OpenOutcome o = OpenDamaged(bytes_, name_);
    ASSERT_TRUE(o.accepted) << o.message;
    ASSERT_EQ(o.problem, "");
    auto f = CactFile::FromBytes(FileBytes::FromBuffer(name_, bytes_));
    ASSERT_TRUE(f.ok());
    metadata_end_ = f->tensors().front().record.offset;  // header + codebook + directory
    tokenizer_begin_ = f->tensors().back().record.offset;
    file_tensors_ = f->tensors();
  }
  // The truncation lengths to try, ascending: all of 0..size-1 for a full sweep, else the
  // sample described at kSanitized (about 7% of the lengths).
  std::vector<uint64_t> TruncationLengths() const {
    const uint64_t size = bytes_.size();
    std::vector<bool> take(size, FullSweep());
    for (uint64_t len = 0; len <= metadata_end_ && len < size; ++len) take[len] = true;
    for (uint64_t len = tokenizer_begin_ - std::min(tokenizer_begin_, kEdgeBytes); len < size;
         ++len)
      take[len] = true;
    for (uint64_t len = metadata_end_; len < size; len += kPayloadStride) take[len] = true;
    auto near = [&](uint64_t at) {
      for (uint64_t len = at - std::min(at, kEdgeBytes); len <= at + kEdgeBytes && len < size;
           ++len)
        take[len] = true;
    };
    for (const TensorEntry& t : file_tensors_) {
      near(t.record.offset);
      near(t.record.offset + t.record.nbytes);
    }
    std::vector<uint64_t> lengths;
    for (uint64_t len = 0; len < size; ++len)
      if (take[len]) lengths.push_back(len);
    return lengths;
  }
  // "all 200225 lengths" or "15224 of 200225 lengths (sample; CACT_FULL_SWEEP=1 for all)".
  static std::string Coverage(uint64_t done, uint64_t all, const char* what) {
    if (done == all) return "all " + std::to_string(all) + " " + what;
    return std::to_string(done) + " of " + std::to_string(all) + " " + what +
           " (sample; CACT_FULL_SWEEP=1 for all)";
  }
  std::vector<uint8_t> bytes_;
  std::string name_;
  uint64_t metadata_end_ = 0, tokenizer_begin_ = 0;
  std::vector<TensorEntry> file_tensors_;
};

// Every proper prefix of the file must be rejected (the file ends right after the tokenizer,
// so no prefix can validate) with a clean error. Under ASan: the sample of TruncationLengths.
TEST_P(CorruptionSweep, EveryTruncationLengthIsACleanError) {
  SweepTally tally;
  const std::vector<uint64_t> lengths = TruncationLengths();
  for (uint64_t len : lengths) {
    OpenOutcome o = OpenDamaged(std::span(bytes_.data(), len), name_);
    if (o.accepted) {
      ADD_FAILURE() << "a " << len << "-byte prefix of " << bytes_.size() << " validated";
      continue;
    }
    tally.Add(o, "truncated to " + std::to_string(len) + " bytes");
  }
  EXPECT_EQ(tally.opens, lengths.size());
  if (FullSweep()) {
    EXPECT_EQ(tally.opens, bytes_.size());
  }
  EXPECT_EQ(tally.failures, 0u);
  // Truncations are caught at several distinct places (header, codebook, directory, blob
  // bounds, tokenizer): a sweep that only ever hit one check would not be exercising much.
  EXPECT_GE(tally.fields.size(), 4u) << tally.Summary();
  const std::string coverage = Coverage(lengths.size(), bytes_.size(), "lengths");
  RecordProperty("coverage", coverage);
  RecordProperty("summary", tally.Summary());
  std::printf("[ truncation %s ] %s; %s\n", GetParam().c_str(), coverage.c_str(),
              tally.Summary().c_str());
}

// Appending bytes is also damage: the file must end right after the last blob.
TEST_P(CorruptionSweep, TrailingBytesAreACleanError) {
  SweepTally tally;
  for (size_t extra : {1, 7, 63, 64, 4096}) {
    std::vector<uint8_t> b = bytes_;
    b.resize(b.size() + extra, 0);
    OpenOutcome o = OpenDamaged(b, name_, {bytes_.size(), b.size()});
    EXPECT_FALSE(o.accepted) << extra << " trailing bytes";
    tally.Add(o, std::to_string(extra) + " trailing bytes");
  }
  EXPECT_EQ(tally.failures, 0u);
}

// Seeded single-bit flips: `count` spread uniformly over the file (mostly payload, which
// must stay readable) and `count` in the metadata (header, codebook, directory) and the
// tokenizer blob, where almost every flip must be caught.
TEST_P(CorruptionSweep, SeededBitFlipsAreCleanErrorsOrReadableFiles) {
  const int kFlips = FullSweep() ? kFullFlips : kSanitizerFlips;
  std::mt19937_64 rng(20261130 + GetParam().size());
  SweepTally uniform, metadata, tokenizer;
  auto flip = [&](uint64_t pos, int bit, SweepTally* tally) {
    bytes_[pos] ^= uint8_t(1u << bit);
    OpenOutcome o = OpenDamaged(bytes_, name_, {pos, pos + 1});
    bytes_[pos] ^= uint8_t(1u << bit);
    tally->Add(o, "bit " + std::to_string(bit) + " of byte " + std::to_string(pos) + " flipped");
  };
  for (int i = 0; i < kFlips; ++i) {
    flip(rng() % bytes_.size(), int(rng() % 8), &uniform);
    flip(rng() % metadata_end_, int(rng() % 8), &metadata);
    flip(tokenizer_begin_ + rng() % (bytes_.size() - tokenizer_begin_), int(rng() % 8), &tokenizer);
  }
  EXPECT_EQ(uniform.failures + metadata.failures + tokenizer.failures, 0u);
  // Blob payload carries no redundancy, so most uniform flips validate; most header and
  // directory flips must be detected (the codebook's low mantissa bits and the unused
  // geometry fields such as max_seq_len legitimately are not).
  EXPECT_GT(uniform.accepted, uint64_t(kFlips / 2)) << uniform.Summary();
  EXPECT_GT(metadata.rejected, uint64_t(kFlips / 2)) << metadata.Summary();
  EXPECT_GT(tokenizer.rejected, 0u) << tokenizer.Summary();
  const std::string coverage = Coverage(kFlips, kFullFlips, "flips per region");
  RecordProperty("coverage", coverage);
  std::printf("[ bit flips %s ] %s\n", GetParam().c_str(), coverage.c_str());
  std::printf("[ bit flips %s uniform ] %s\n", GetParam().c_str(), uniform.Summary().c_str());
  std::printf("[ bit flips %s metadata ] %s\n", GetParam().c_str(), metadata.Summary().c_str());
  std::printf("[ bit flips %s tokenizer ] %s\n", GetParam().c_str(), tokenizer.Summary().c_str());
}

// Random byte values (not single bits) written over whole fields of one directory record:
// the validator must reject each lie about dtype, ndim, shape, offset, nbytes, group, bits.
TEST_P(CorruptionSweep, RandomRecordFieldValuesAreCleanErrorsOrReadableFiles) {
  std::mt19937_64 rng(7 + GetParam().size());
  SweepTally tally;
  const uint64_t dir = 120 + 4 * 28;
  const uint64_t records = (metadata_end_ - dir) / 44;
  // (offset inside the record, width) of each field of '<BBHIIIIQQII'.
  const std::pair<int, int> fields[] = {{0, 1},  {1, 1},  {2, 2},  {4, 4},  {8, 4}, {12, 4},
                                        {16, 4}, {20, 8}, {28, 8}, {36, 4}, {40, 4}};
  for (int i = 0; i < 5000; ++i) {
    const uint64_t rec = rng() % records;
    const auto [off, width] = fields[rng() % std::size(fields)];
    const uint64_t pos = dir + rec * 44 + off;
    std::vector<uint8_t> saved(bytes_.begin() + pos, bytes_.begin() + pos + width);
    // Small values, values near the real one, and arbitrary ones.
    uint64_t v = rng();
    if (i % 3 == 0) v &= 0xFF;
    for (int k = 0; k < width; ++k) bytes_[pos + k] = uint8_t(v >> (8 * k));
    OpenOutcome o = OpenDamaged(bytes_, name_, {pos, pos + width});
    std::copy(saved.begin(), saved.end(), bytes_.begin() + pos);
    tally.Add(o, "record " + std::to_string(rec) + " field at +" + std::to_string(off) +
                     " set to " + std::to_string(v));
  }
  EXPECT_EQ(tally.failures, 0u);
  EXPECT_GT(tally.rejected, 4000u) << tally.Summary();
  std::printf("[ record fields %s ] %s\n", GetParam().c_str(), tally.Summary().c_str());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CorruptionSweep, ::testing::Values("tiny", "odd"));

}  // namespace
}  // namespace cact
