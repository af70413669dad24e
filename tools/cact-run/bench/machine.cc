#include "tools/cact-run/bench/machine.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/kernels/isa.h"
#include "engine/kernels/team.h"
#include "lib/resources.h"
#include "tools/cact-run/bench/machine_table.h"

namespace cact::kernels {
namespace {

uint64_t ReadPassScalar(const uint8_t* p, size_t bytes) {
  uint64_t a = 0, b = 0;
  size_t i = 0;
  for (; i + 16 <= bytes; i += 16) {
    uint64_t x, y;
    std::memcpy(&x, p + i, 8);
    std::memcpy(&y, p + i + 8, 8);
    a ^= x;
    b ^= y;
  }
  return a + b + i;
}

// Part `part` of `parts` of a buffer of `blocks` 256-byte blocks, split on 16-block
// boundaries (as the kernels split a matrix's rows).
struct BlockRange {
  uint32_t begin, end;
};
BlockRange SplitBlocks(uint32_t blocks, uint32_t parts, uint32_t part) {
  const uint32_t units = (blocks + 15) / 16;
  const uint32_t u0 = uint32_t(uint64_t(units) * part / parts);
  const uint32_t u1 = uint32_t(uint64_t(units) * (part + 1) / parts);
  return {std::min(blocks, u0 * 16), std::min(blocks, u1 * 16)};
}

uint64_t DotLoopScalar(uint64_t iters) {
  volatile int32_t acc = 0;
  for (uint64_t i = 0; i < iters; ++i)
    for (int k = 0; k < 64; ++k) acc = acc + int32_t(int8_t(k)) * int32_t(uint8_t(i));
  return iters * 64;
}

}  // namespace

double MeasureReadBandwidth(size_t bytes, uint32_t threads, double seconds) {
  bytes = std::max<size_t>(bytes / 256 * 256, 4096);
  std::vector<uint8_t> buf(bytes);
  for (size_t i = 0; i < bytes; ++i) buf[i] = uint8_t(i * 131 + 7);
  const bool simd = IsAvx512(ActiveIsa());
  Team team(threads);
  double best = 0;
  volatile uint64_t sink = 0;
  const Stopwatch elapsed;
  do {
    team.Run([&](uint32_t me, uint32_t nt) {
      BlockRange r = SplitBlocks(uint32_t(bytes / 256), nt, me);  // 256-byte blocks
      const uint8_t* p = buf.data() + size_t(r.begin) * 256;
      const size_t n = size_t(r.end - r.begin) * 256;
      sink = sink + (simd ? internal::ReadPassAvx512(p, n) : ReadPassScalar(p, n));  // warm
    });
    const Stopwatch pass_clock;
    const int passes = 8;
    team.Run([&](uint32_t me, uint32_t nt) {
      BlockRange r = SplitBlocks(uint32_t(bytes / 256), nt, me);
      const uint8_t* p = buf.data() + size_t(r.begin) * 256;
      const size_t n = size_t(r.end - r.begin) * 256;
      uint64_t s = 0;
      for (int k = 0; k < passes; ++k)
        s += simd ? internal::ReadPassAvx512(p, n) : ReadPassScalar(p, n);
      if (s == 42) sink = sink + 1;
    });
    best = std::max(best, double(bytes) * passes / pass_clock.Seconds() / 1e9);
  } while (elapsed.Seconds() < seconds);
  return best;
}

double MeasureInt8Throughput(uint32_t threads, double seconds) {
  uint64_t (*loop)(uint64_t) = DotLoopScalar;
  switch (ActiveIsa()) {
    case Isa::kAvx512:
    case Isa::kAvx512Vbmi:
    case Isa::kAmx:  // the VNNI loop: kAmx decodes with VNNI (its tiles only do prefill)
      loop = internal::DotLoopAvx512;
      break;
    case Isa::kAvxVnni:
      loop = internal::DotLoopAvxVnni;
      break;
    case Isa::kAvx2:
      loop = internal::DotLoopAvx2;
      break;
    case Isa::kScalar:
      break;
  }
  Team team(threads);
  double best = 0;
  const Stopwatch elapsed;
  do {
    std::vector<uint64_t> macs(threads, 0);
    const Stopwatch run_clock;
    team.Run([&](uint32_t me, uint32_t) { macs[me] = loop(200000); });
    const double dt = run_clock.Seconds();
    uint64_t total = 0;
    for (uint64_t m : macs) total += m;
    best = std::max(best, double(total) / dt / 1e9);
  } while (elapsed.Seconds() < seconds);
  return best;
}

}  // namespace cact::kernels
