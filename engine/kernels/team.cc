#include "engine/kernels/team.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CACT_PAUSE() _mm_pause()
#else
#define CACT_PAUSE() ((void)0)
#endif

namespace cact::kernels {
namespace {

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// How long a waiting member spins before it sleeps on the futex. A budget in time, not in
// pause instructions: pause takes ~10 ns on some CPUs and ~40 ns on others. Waking a
// sleeping thread costs tens of microseconds (more in a VM, where it takes an IPI to a
// halted vCPU), while the work between two decode barriers is ~10 us; with a 3 us spin,
// half of all barrier waits slept and two threads decoded at half the one-thread speed
// (docs/benchmarks.md). 200 us also keeps a worker awake between decode steps.
constexpr auto kSpinBudget = std::chrono::microseconds(200);
constexpr int kPausesPerClockRead = 32;

// Waits until `word` differs from `seen`.
void AwaitChange(const std::atomic<uint32_t>& word, uint32_t seen) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinBudget;
  for (;;) {
    for (int i = 0; i < kPausesPerClockRead; ++i) {
      if (word.load(std::memory_order_acquire) != seen) return;
      CACT_PAUSE();
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
  }
  while (word.load(std::memory_order_acquire) == seen) word.wait(seen, std::memory_order_acquire);
}

std::atomic<uint32_t> g_lag_member{0};
std::atomic<int64_t> g_lag_us{0};
std::atomic<uint32_t> g_solo_period{0};
thread_local uint32_t t_member = 0;  // this thread's member index in its team

void MaybeLag() {
  const int64_t lag = g_lag_us.load(std::memory_order_relaxed);
  if (lag > 0 && t_member == g_lag_member.load(std::memory_order_relaxed))
    std::this_thread::sleep_for(std::chrono::microseconds(lag));
}

}  // namespace

void Team::SetLagForTesting(uint32_t member, std::chrono::microseconds lag) {
  g_lag_member.store(member, std::memory_order_relaxed);
  g_lag_us.store(lag.count(), std::memory_order_relaxed);
}

void Team::SetSoloPeriodForTesting(uint32_t period) {
  g_solo_period.store(period, std::memory_order_relaxed);
}

void TeamBarrier::Wait() {
  if (threads_ <= 1) return;
  const uint32_t gen = generation_.load(std::memory_order_acquire);
  if (count_.fetch_add(1, std::memory_order_acq_rel) + 1 == threads_) {
    count_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    return;
  }
  AwaitChange(generation_, gen);
}

Team::Team(uint32_t threads) : size_(threads < 1 ? 1 : threads), barrier_(size_) {
  for (uint32_t me = 1; me < size_; ++me) workers_.emplace_back([this, me] { Worker(me); });
}

Team::~Team() {
  stop_.store(true, std::memory_order_release);
  job_generation_.fetch_add(1, std::memory_order_release);
  job_generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void Team::Barrier() {
  if (solo_) return;
  if (std::this_thread::get_id() == caller_) {  // the caller measures its waiting (team.h)
    const double t0 = Seconds();
    barrier_.Wait();
    waited_s_ += Seconds() - t0;
  } else {
    barrier_.Wait();
  }
  MaybeLag();
}

void Team::Run(const std::function<void(uint32_t, uint32_t)>& fn) {
  if (size_ == 1) {
    fn(0, 1);
    return;
  }
  const uint32_t period = g_solo_period.load(std::memory_order_relaxed);
  if (solo_left_ > 0 || (period > 0 && ++runs_ % period == 0)) {
    if (solo_left_ > 0) --solo_left_;
    ++solo_total_;
    solo_ = true;
    fn(0, 1);
    solo_ = false;
    return;
  }
  const double t0 = Seconds();
  waited_s_ = 0;
  caller_ = std::this_thread::get_id();
  job_ = &fn;
  job_generation_.fetch_add(1, std::memory_order_release);
  job_generation_.notify_all();
  fn(0, size_);
  Barrier();  // every member finished
  // Mostly waiting for partners: the machine is oversubscribed (see team.h). (Not while
  // the test lag is on: then the waiting is the point.)
  if (waited_s_ <= 0.5 * (Seconds() - t0) || g_lag_us.load(std::memory_order_relaxed) > 0) {
    busy_streak_ = 0;
    solo_len_ = kSoloRuns;
  } else if (++busy_streak_ >= kBusyRuns) {
    busy_streak_ = 0;
    solo_left_ = solo_len_;
    solo_len_ = std::min(2 * solo_len_, kMaxSoloRuns);  // still busy next time: back off
  }
}

void Team::Worker(uint32_t me) {
  t_member = me;
  uint32_t seen = 0;
  for (;;) {
    AwaitChange(job_generation_, seen);
    seen = job_generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    (*job_)(me, size_);
    barrier_.Wait();
  }
}

}  // namespace cact::kernels
