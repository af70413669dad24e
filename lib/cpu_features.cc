#include "lib/cpu_features.h"

#include <sched.h>

#include <cstdint>
#include <cstring>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace cact {

int AvailableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set) > 0 ? CPU_COUNT(&set) : 1;
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? int(n) : 1;
}

#if defined(__x86_64__) || defined(__i386__)
static uint64_t Xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t(edx) << 32) | eax;
}
#endif

static CpuFeatures Detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  bool osxsave = c & (1u << 27);
  bool avx = c & (1u << 28);
  f.fma = c & (1u << 12);
  const bool ssse3 = c & (1u << 9), sse41 = c & (1u << 19);
  f.f16c = c & (1u << 29);
  uint64_t xcr0 = osxsave ? Xgetbv0() : 0;
  bool ymm_os = (xcr0 & 6) == 6;
  bool zmm_os = (xcr0 & 0xE6) == 0xE6;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = avx && ymm_os && (b & (1u << 5));
    f.avx512f = zmm_os && (b & (1u << 16));
    f.avx512bw = zmm_os && (b & (1u << 30));
    f.avx512vl = zmm_os && (b & (1u << 31));
    f.avx512_vnni = zmm_os && (c & (1u << 11));
    f.avx512_vbmi = zmm_os && (c & (1u << 1));
    f.sha_ni = ssse3 && sse41 && (b & (1u << 29));
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx_vnni = ymm_os && (a & (1u << 4));
  f.fma = f.fma && ymm_os;
  f.f16c = f.f16c && ymm_os;
  char brand[49] = {};
  for (unsigned i = 0; i < 3; ++i) {
    unsigned r[4];
    if (!__get_cpuid(0x80000002 + i, &r[0], &r[1], &r[2], &r[3])) break;
    std::memcpy(brand + 16 * i, r, 16);
  }
  f.brand = brand;
  while (!f.brand.empty() && f.brand.back() == ' ') f.brand.pop_back();
#endif
  return f;
}

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures f = Detect();
  return f;
}

bool AmxInt8Usable() {
#if defined(__x86_64__) && defined(__linux__)
  static const bool ok = [] {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (!(d & (1u << 24)) || !(d & (1u << 25))) return false;                // AMX-TILE, AMX-INT8
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE
    const uint64_t tile_state = (uint64_t(1) << 17) | (uint64_t(1) << 18);   // XTILECFG, DATA
    if ((Xgetbv0() & tile_state) != tile_state) return false;
    // Linux enables the tile data per process on request (ARCH_REQ_XCOMP_PERM for
    // XFEATURE_XTILEDATA); without it the first tile instruction kills the process.
    return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
  }();
  return ok;
#else
  return false;
#endif
}

}  // namespace cact
