// The BLAS behind libtorch and the thread rule (blas_threads.h).
#include "libtorch/blas_threads.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "lib/cpu_features.h"

namespace cact::torchscript {
namespace {

// The library that defines sgemm_ in the global scope (what libtorch's calls bind to) and
// a handle on it: dlsym on the handle searches it and its dependencies, so OpenBLAS's
// control functions are found behind Debian's libblas.so.3 wrapper over libopenblas.so.0,
// and never in some other copy of OpenBLAS that another library happened to load.
struct BlasHandle {
  void* handle = nullptr;
  std::string path;
};

const BlasHandle& Blas() {
  static const BlasHandle blas = [] {
    BlasHandle b;
    void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_");
    Dl_info info{};
    if (sgemm == nullptr || dladdr(sgemm, &info) == 0 || info.dli_fname == nullptr) return b;
    std::error_code ec;
    const std::filesystem::path real = std::filesystem::canonical(info.dli_fname, ec);
    b.path = ec ? std::string(info.dli_fname) : real.string();
    // Already loaded (RTLD_NOLOAD): this only takes a reference, kept for the process.
    b.handle = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    return b;
  }();
  return blas;
}

void* BlasSymbol(const char* name) {
  const BlasHandle& b = Blas();
  return b.handle ? dlsym(b.handle, name) : nullptr;
}

using GetConfigFn = char* (*)();
using GetThreadsFn = int (*)();
using SetThreadsFn = void (*)(int);

// A thread-count variable the user set: a positive integer (OpenMP and OpenBLAS ignore
// anything else).
const char* ThreadVariable(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return nullptr;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return (n > 0 && end != v) ? name : nullptr;
}

std::mutex& ConfigMutex() {
  static std::mutex m;
  return m;
}
bool configured = false;  // guarded by ConfigMutex()
ThreadSettings settings;  // guarded by ConfigMutex()

ThreadSettings ApplyLocked(int requested) {
  ThreadSettings s;
  s.requested = requested > 0 ? requested : 0;
  s.total = s.requested > 0 ? s.requested : AvailableCpus();
  auto set_blas = reinterpret_cast<SetThreadsFn>(BlasSymbol("openblas_set_num_threads"));
  auto get_blas = reinterpret_cast<GetThreadsFn>(BlasSymbol("openblas_get_num_threads"));
  // OpenBLAS gets T; libtorch's OpenMP pool gets 1 whatever the BLAS (measured on needle2
  // prefill: two OpenMP threads cost 5-10x, with OpenBLAS and with the reference BLAS alike).
  const int blas_want = s.total;
  const int torch_want = 1;

  if (const char* v = ThreadVariable("OPENBLAS_NUM_THREADS")) {
    s.blas_source = v;  // OpenBLAS read it at load time
  } else if (const char* g = ThreadVariable("GOTO_NUM_THREADS")) {
    s.blas_source = g;
  } else if (set_blas) {
    set_blas(blas_want);
    s.blas_source = "rule";
  } else {
    s.blas_source = "not controlled";
  }
  s.blas = get_blas ? get_blas() : DescribeBlas().threads;

  if (const char* v = ThreadVariable("OMP_NUM_THREADS")) {
    s.torch_source = v;  // libgomp and libtorch read it at start-up
  } else {
    at::set_num_threads(torch_want);
    s.torch_source = "rule";
  }
  // The inter-op pool (TorchScript fork/wait, which the exported module never uses) can be
  // sized once, before it starts.
  static bool interop_set = false;
  if (!interop_set) {
    interop_set = true;
    try {
      at::set_num_interop_threads(1);
    } catch (const std::exception&) {
      // started already (someone ran inter-op work first): it keeps its size
    }
  }
  s.torch_intra = at::get_num_threads();
  s.torch_interop = at::get_num_interop_threads();
  return s;
}

}  // namespace

BlasLibrary DescribeBlas() {
  BlasLibrary b;
  b.path = Blas().path;
  if (b.path.empty()) {
    b.vendor = "unknown";
    return b;
  }
  if (auto config = reinterpret_cast<GetConfigFn>(BlasSymbol("openblas_get_config"))) {
    b.vendor = "OpenBLAS";
    if (const char* c = config()) b.config = c;
    if (auto get = reinterpret_cast<GetThreadsFn>(BlasSymbol("openblas_get_num_threads")))
      b.threads = get();
  } else if (BlasSymbol("bli_info_get_version_str")) {
    b.vendor = "BLIS";
  } else if (BlasSymbol("MKL_Get_Version") || BlasSymbol("mkl_get_version")) {
    b.vendor = "MKL";
  } else {
    // A libblas.so.3 without any vendor's entry points is netlib's reference BLAS (Debian's
    // libblas3, /usr/lib/<triplet>/blas/libblas.so.3): one thread, unblocked loops.
    const std::string name = std::filesystem::path(b.path).filename().string();
    b.vendor = name.rfind("libblas.so", 0) == 0 ? "reference" : "unknown";
    b.threads = b.vendor == "reference" ? 1 : -1;
  }
  return b;
}

ThreadSettings ConfigureThreads(int requested) {
  std::lock_guard<std::mutex> lock(ConfigMutex());
  settings = ApplyLocked(requested);
  configured = true;
  return settings;
}

ThreadSettings CurrentThreads() {
  std::lock_guard<std::mutex> lock(ConfigMutex());
  if (!configured) {
    settings = ApplyLocked(0);
    configured = true;
  }
  return settings;
}

std::string BlasWarning(const BlasLibrary& blas) {
  if (blas.optimised()) return "";
  const std::string where = blas.path.empty() ? "no sgemm_ found" : blas.path;
  return "warning: libtorch's BLAS is " +
         std::string(blas.vendor == "reference" ? "the reference BLAS" : "not recognised") + " (" +
         where +
         "): its matrix products run ~10x slower than on OpenBLAS; install libopenblas0-pthread "
         "(update-alternatives --display libblas.so.3-x86_64-linux-gnu shows the choice)";
}

std::string DescribeThreads(const BlasLibrary& blas, const ThreadSettings& t) {
  std::string s = "BLAS: " + blas.vendor + " (" + (blas.path.empty() ? "none" : blas.path);
  if (!blas.config.empty()) s += "; " + blas.config;
  s += "), ";
  s += t.blas >= 0 ? std::to_string(t.blas) + " thread" + (t.blas == 1 ? "" : "s")
                   : std::string("threads unknown");
  s += " (" + t.blas_source + "); libtorch intra-op " + std::to_string(t.torch_intra) + " (" +
       t.torch_source + "), inter-op " + std::to_string(t.torch_interop);
  return s;
}

}  // namespace cact::torchscript
