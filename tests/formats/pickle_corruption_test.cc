// Corruption sweep of a numpy-written protocol 4 pickle: every truncation and 10,000 seeded
// single-bit flips parse to a document or to an error, never a crash (ASan and UBSan watch
// the reads under tests/sanitize.sh). Accepted documents are walked in full.
#include <gtest/gtest.h>

#include <random>
#include <unordered_set>

#include "formats/pickle.h"
#include "support/test_support.h"

namespace cact {
namespace {

uint64_t Touch(const PickleObject& o, int depth, std::unordered_set<const PickleObject*>* seen) {
  if (depth > kPickleMaxWalkDepth || !seen->insert(&o).second) return 0;
  uint64_t sum = o.text.size();
  for (const PickleObject* item : o.items) sum += Touch(*item, depth + 1, seen);
  for (const auto& [k, v] : o.entries)
    sum += Touch(*k, depth + 1, seen) + Touch(*v, depth + 1, seen);
  if (o.kind == PickleObject::Kind::kArray) {
    EXPECT_EQ(o.array->NumElements() * PickleDtypeSize(o.array->dtype), o.array->data.size());
    for (uint8_t b : o.array->data) sum += b;
  }
  return sum;
}

bool ParsesOk(const std::vector<uint8_t>& bytes) {
  auto doc = PickleDocument::Parse(FileBytes::FromBuffer("c.pkl", bytes));
  if (!doc.ok()) {
    EXPECT_EQ(std::string(doc.status().message()).rfind("c.pkl: ", 0), 0u) << doc.status();
    return false;
  }
  std::unordered_set<const PickleObject*> seen;
  volatile uint64_t sum = Touch(doc->root(), 0, &seen);
  (void)sum;
  return true;
}

TEST(PickleCorruptionTest, TruncationsAndBitFlipsNeverCrash) {
  testing::TempDir dir;
  const std::string path = dir / "sweep.pkl";
  const auto made = testing::Run(
      testing::Python() +
      " -c \"import pickle, sys, numpy as np, collections; r = np.random.default_rng(1); "
      "d = collections.OrderedDict(w=r.standard_normal((16, 24)).astype(np.float32), "
      "h=np.ones((5, 3), np.float16), i=np.asfortranarray(np.arange(12).reshape(3, 4)), "
      "s=np.float32(2.5), cfg={'lr': 0.1, 'name': 'sweep', 'dims': (16, 24), 'on': True}); "
      "open(sys.argv[1], 'wb').write(pickle.dumps(d, protocol=4))\" " +
      path);
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const std::vector<uint8_t> good = testing::ReadAll(path);
  ASSERT_GT(good.size(), 2000u);
  ASSERT_LT(good.size(), 10000u);
  ASSERT_TRUE(ParsesOk(good));

  int truncated_ok = 0;
  for (size_t n = 0; n < good.size(); ++n)
    truncated_ok += ParsesOk(std::vector<uint8_t>(good.begin(), good.begin() + ptrdiff_t(n)));
  EXPECT_EQ(truncated_ok, 0) << "a strict prefix of the pickle parsed";

  std::mt19937_64 rng(20261202);
  int ok = 0, refused = 0;
  std::vector<uint8_t> flipped = good;
  for (int k = 0; k < 10000; ++k) {
    const size_t bit = rng() % (good.size() * 8);
    flipped[bit / 8] ^= uint8_t(1u << (bit % 8));
    (ParsesOk(flipped) ? ok : refused)++;
    flipped[bit / 8] = good[bit / 8];
  }
  EXPECT_EQ(ok + refused, 10000);
  EXPECT_GT(refused, 0);
  EXPECT_GT(ok, 0);  // flips inside array data keep the pickle valid
  std::printf("bit flips: %d parsed, %d refused\n", ok, refused);
}

}  // namespace
}  // namespace cact
