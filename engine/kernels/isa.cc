#include "engine/kernels/isa.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_format.h"
#include "lib/cpu_features.h"

namespace cact::kernels {
namespace {

std::atomic<int> g_active{-1};

Isa InitialIsa() {
  const char* env = std::getenv("CACT_KERNEL");
  if (env && *env) {
    auto isa = ParseIsa(env);
    if (isa.ok() && IsaSupported(*isa)) return *isa;
    std::fprintf(stderr, "cact: CACT_KERNEL=%s is %s; using %s\n", env,
                 isa.ok() ? "not supported by this CPU" : "unknown", IsaName(BestIsa()));
  }
  return BestIsa();
}

}  // namespace

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvxVnni:
      return "avxvnni";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx512Vbmi:
      return "avx512vbmi";
    case Isa::kAmx:
      return "amx";
  }
  return "?";
}

absl::StatusOr<Isa> ParseIsa(std::string_view name) {
  for (Isa isa : kAllIsas)
    if (name == IsaName(isa)) return isa;
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown kernel '%s' (scalar, avx2, avxvnni, avx512, avx512vbmi or amx)", name));
}

bool IsaSupported(Isa isa) {
  const CpuFeatures& f = GetCpuFeatures();
  bool avx2 = f.avx2 && f.fma && f.f16c;
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return avx2;
    case Isa::kAvxVnni:
      return avx2 && f.avx_vnni;
    case Isa::kAvx512:
      return avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512_vnni;
    case Isa::kAvx512Vbmi:
      return IsaSupported(Isa::kAvx512) && f.avx512_vbmi;
    case Isa::kAmx:
      return IsaSupported(Isa::kAvx512Vbmi) && AmxInt8Usable();
  }
  return false;
}

// kAmx is left out: it is opt-in (CACT_KERNEL=amx or SetActiveIsa) until its prefill has
// been measured on AMX hardware against avx512vbmi (it was written and tested against a
// tile emulator on a machine without AMX).
Isa BestIsa() {
  for (Isa isa : {Isa::kAvx512Vbmi, Isa::kAvx512, Isa::kAvxVnni, Isa::kAvx2})
    if (IsaSupported(isa)) return isa;
  return Isa::kScalar;
}

Isa ActiveIsa() {
  int v = g_active.load(std::memory_order_relaxed);
  if (v < 0) {
    v = int(InitialIsa());
    int expected = -1;
    if (!g_active.compare_exchange_strong(expected, v)) v = expected;
  }
  return Isa(v);
}

bool SetActiveIsa(Isa isa) {
  if (!IsaSupported(isa)) return false;
  g_active.store(int(isa));
  return true;
}

}  // namespace cact::kernels
