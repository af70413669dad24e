#include "reliability/allocation_probe.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>

namespace cact::reliability {
namespace {

std::atomic<int> g_armed{0};
std::atomic<size_t> g_max{0};

void Note(size_t n) {
  if (g_armed.load(std::memory_order_relaxed) == 0) return;
  size_t cur = g_max.load(std::memory_order_relaxed);
  while (n > cur && !g_max.compare_exchange_weak(cur, n, std::memory_order_relaxed)) {
  }
}

void* Allocate(size_t n) {
  Note(n);
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}

void* AllocateAligned(size_t n, std::align_val_t al) {
  Note(n);
  const size_t a = static_cast<size_t>(al);
  size_t rounded = (n + a - 1) / a * a;  // aligned_alloc wants a multiple of the alignment
  if (rounded == 0) rounded = a;
  void* p = std::aligned_alloc(a, rounded);
  if (!p) throw std::bad_alloc();
  return p;
}

uint64_t VmSizeBytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t pages = 0;
  f >> pages;
  return pages * uint64_t(sysconf(_SC_PAGESIZE));
}

}  // namespace

AllocationProbe::AllocationProbe() {
  g_max = 0;
  g_armed++;
}
AllocationProbe::~AllocationProbe() { g_armed--; }
size_t AllocationProbe::max_request() const { return g_max.load(); }

std::string ChildResult::describe() const {
  if (exited) return "child exited with " + std::to_string(exit_code);
  return "child killed by signal " + std::to_string(signal) +
         (signal == SIGABRT ? " (abort: an allocation beyond the address-space limit?)" : "");
}

ChildResult RunInChildWithAddressSpaceLimit(const std::function<int()>& fn, uint64_t headroom) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    if (!kAddressSanitizer) {
      const rlim_t limit = VmSizeBytes() + headroom;
      struct rlimit rl = {limit, limit};
      setrlimit(RLIMIT_AS, &rl);
    }
    int code = 0;
    try {
      code = fn();
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "child: std::bad_alloc (allocation beyond the limit)\n");
      std::abort();
    }
    std::fflush(nullptr);
    _exit(code);
  }
  ChildResult r;
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) return r;
  r.exited = WIFEXITED(st);
  r.exit_code = r.exited ? WEXITSTATUS(st) : -1;
  r.signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
  return r;
}

}  // namespace cact::reliability

// Global replacements: every variant, so new/delete always pair through malloc/free.
void* operator new(size_t n) { return cact::reliability::Allocate(n); }
void* operator new[](size_t n) { return cact::reliability::Allocate(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return cact::reliability::Allocate(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  try {
    return cact::reliability::Allocate(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(size_t n, std::align_val_t a) {
  return cact::reliability::AllocateAligned(n, a);
}
void* operator new[](size_t n, std::align_val_t a) {
  return cact::reliability::AllocateAligned(n, a);
}
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  try {
    return cact::reliability::AllocateAligned(n, a);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  try {
    return cact::reliability::AllocateAligned(n, a);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
