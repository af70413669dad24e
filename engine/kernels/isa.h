// Which kernel instruction set runs: the names, what this CPU supports (lib/cpu_features.h
// detects it), and the run-time choice with its overrides (CACT_KERNEL, SetActiveIsa).
// The programs' face of the kernels for choosing and reporting one.
#pragma once
#include <string_view>

#include "absl/status/statusor.h"

namespace cact::kernels {

// kAvx512Vbmi: the AVX-512 VNNI kernels with vpermb code tables (Ice Lake and later);
// kAvx512 is the same without VBMI (Cascade Lake). kAmx: kAvx512Vbmi with an AMX-INT8
// (tdpbssd tiles) prefill product (Sapphire Rapids and later); decode stays on VNNI.
enum class Isa { kScalar = 0, kAvx2 = 1, kAvxVnni = 2, kAvx512 = 3, kAvx512Vbmi = 4, kAmx = 5 };
// Every kernel built, slowest first.
inline constexpr Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2,       Isa::kAvxVnni,
                                   Isa::kAvx512, Isa::kAvx512Vbmi, Isa::kAmx};
const char* IsaName(Isa isa);
// scalar|avx2|avxvnni|avx512|avx512vbmi|amx
absl::StatusOr<Isa> ParseIsa(std::string_view name);
// The AVX-512 kernels (with or without VBMI; kAmx uses the VBMI ones except for prefill).
inline bool IsAvx512(Isa isa) {
  return isa == Isa::kAvx512 || isa == Isa::kAvx512Vbmi || isa == Isa::kAmx;
}
// This CPU (and OS) can run it. kAmx: AVX-512 VBMI and lib's AmxInt8Usable (which asks
// Linux for the tile data once, on the first call).
bool IsaSupported(Isa isa);
Isa BestIsa();  // best supported, from CPUID (never kAmx: opt-in, see isa.cc)
// The kernel in use: CACT_KERNEL (if set and supported; an unsupported or unknown value
// falls back to BestIsa() with a warning on stderr) else BestIsa(). SetActiveIsa overrides
// (tests, benchmarks); it returns false and changes nothing when unsupported.
Isa ActiveIsa();
bool SetActiveIsa(Isa isa);

}  // namespace cact::kernels
