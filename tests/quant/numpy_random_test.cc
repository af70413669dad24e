// NumpyRandomState against numpy.random.RandomState: the raw MT19937 words, random_sample
// doubles and the legacy polar gauss (with its cached second value), interleaved.
#include "quant/cq/numpy_random.h"

#include <gtest/gtest.h>

#include "quant_test_util.h"

namespace cact {
namespace {

using testing::BitsOf;
using testing::ReadRaw;
using testing::RunPythonOracle;
using testing::TempDir;

TEST(NumpyRandom, MatchesNumpyStreams) {
  TempDir dir;
  ASSERT_TRUE(RunPythonOracle(dir, R"(
import numpy as np
for seed in (0, 1, 12345, 4294967295):
    rs = np.random.RandomState(seed)
    rs.randint(0, 2**32, size=1000, dtype=np.uint64).astype(np.uint32).tofile(f'u32_{seed}.bin')
    rs = np.random.RandomState(seed)
    rs.random_sample(3000).tofile(f'uniform_{seed}.bin')
    rs = np.random.RandomState(seed)
    rs.randn(5001).tofile(f'gauss_{seed}.bin')
    # Interleaved: an odd gauss count leaves a cached value across random_sample calls.
    rs = np.random.RandomState(seed)
    np.concatenate([rs.randn(3), rs.random_sample(2), rs.randn(2), rs.random_sample(1), rs.randn(5)]).tofile(f'mixed_{seed}.bin')
)"));
  for (uint32_t seed : {0u, 1u, 12345u, 4294967295u}) {
    SCOPED_TRACE(seed);
    const std::string s = std::to_string(seed);
    std::vector<uint32_t> u32 = ReadRaw<uint32_t>(dir / ("u32_" + s + ".bin"));
    ASSERT_EQ(u32.size(), 1000u);
    NumpyRandomState a(seed);
    for (size_t i = 0; i < u32.size(); ++i) ASSERT_EQ(a.NextU32(), u32[i]) << i;

    std::vector<double> uni = ReadRaw<double>(dir / ("uniform_" + s + ".bin"));
    ASSERT_EQ(uni.size(), 3000u);
    NumpyRandomState b(seed);
    for (size_t i = 0; i < uni.size(); ++i)
      ASSERT_EQ(BitsOf(b.RandomSample()), BitsOf(uni[i])) << i;

    std::vector<double> gauss = ReadRaw<double>(dir / ("gauss_" + s + ".bin"));
    ASSERT_EQ(gauss.size(), 5001u);
    NumpyRandomState c(seed);
    for (size_t i = 0; i < gauss.size(); ++i)
      ASSERT_EQ(BitsOf(c.StandardNormal()), BitsOf(gauss[i])) << i;

    std::vector<double> mixed = ReadRaw<double>(dir / ("mixed_" + s + ".bin"));
    ASSERT_EQ(mixed.size(), 13u);
    NumpyRandomState d(seed);
    std::vector<double> got;
    for (int i = 0; i < 3; ++i) got.push_back(d.StandardNormal());
    for (int i = 0; i < 2; ++i) got.push_back(d.RandomSample());
    for (int i = 0; i < 2; ++i) got.push_back(d.StandardNormal());
    got.push_back(d.RandomSample());
    for (int i = 0; i < 5; ++i) got.push_back(d.StandardNormal());
    for (size_t i = 0; i < mixed.size(); ++i) EXPECT_EQ(BitsOf(got[i]), BitsOf(mixed[i])) << i;
  }
}

}  // namespace
}  // namespace cact
