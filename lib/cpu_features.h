// Run-time CPU feature detection (CPUID + XGETBV), used to pick SIMD kernels.
#pragma once
#include <string>

namespace cact {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512_vnni = false;
  bool avx512_vbmi = false;  // vpermb (Ice Lake and later)
  bool avx_vnni = false;
  bool sha_ni = false;  // SHA extensions, with the SSSE3 + SSE4.1 the SHA-256 path also uses
  std::string brand;
};

// CPUs this process may run on (its affinity mask; at least 1).
int AvailableCpus();

const CpuFeatures& GetCpuFeatures();

// AMX-TILE and AMX-INT8 usable by this process: the CPUID bits, the tile state enabled in
// XCR0, and Linux granting the process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM,
// requested once, on the first call; not part of GetCpuFeatures so that only a process
// that may use the tiles asks for the larger signal frames they bring).
bool AmxInt8Usable();

}  // namespace cact
