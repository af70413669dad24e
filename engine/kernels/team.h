// A small persistent thread team for the fast path: Run(fn) executes fn(me, nt) on every
// member (the caller is member 0) and returns when all are done; Barrier() synchronises
// the members inside fn. Waiting spins for up to 200 us, then sleeps on a futex
// (std::atomic::wait): the work between two decode barriers is ~10 us and a futex wake-up
// costs more than that, so a barrier on an idle machine must not sleep; a member that
// waits longer is idle anyway. When the machine is oversubscribed, spinning would burn the
// CPU a descheduled partner needs: the solo fallback below takes over then.
//
// Oversubscription: when other processes leave each member about half a core, a partner is
// often descheduled while the others wait at a barrier, and a decode step with ~84
// barriers went from 5 ms on one thread to 120 ms on two (docs/benchmarks.md). So the
// caller measures how much of each parallel Run it spends waiting; after kBusyRuns
// consecutive runs waiting more than half the time, the team runs the next kSoloRuns jobs
// as fn(0, 1) on the caller alone (Barrier() is then a no-op), then tries parallel again
// (each time it is still busy, the solo stretch doubles, up to kMaxSoloRuns).
// Every job is written for any member count, so results do not change (the fast path is
// bit-identical across thread counts).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace cact::kernels {

class TeamBarrier {
 public:
  explicit TeamBarrier(uint32_t threads = 1) : threads_(threads) {}
  // Every one of the `threads` members calls Wait(); all return after the last arrives.
  // Writes before Wait() by any member are visible to all members after it.
  void Wait();
  uint32_t threads() const { return threads_; }

 private:
  uint32_t threads_;
  alignas(64) std::atomic<uint32_t> count_{0};
  alignas(64) std::atomic<uint32_t> generation_{0};
};

class Team {
 public:
  explicit Team(uint32_t threads);
  ~Team();
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  static constexpr uint32_t kBusyRuns = 3, kSoloRuns = 256, kMaxSoloRuns = 1u << 16;

  uint32_t size() const { return size_; }
  void Run(const std::function<void(uint32_t me, uint32_t nt)>& fn);
  void Barrier();
  // Test hook, for every team: member `member` (0 = the caller) sleeps `lag` after each of its
  // barriers, so the others run ahead into the next phase. A data race that the barriers
  // do not order (a buffer written in one phase while a partner still reads it from the
  // previous one) then changes the results; tests compare them with one thread. 0: off.
  static void SetLagForTesting(uint32_t member, std::chrono::microseconds lag);
  // Test hook, for every team: every `period`-th Run (counted per team) runs solo, as the
  // oversubscription fallback would, so jobs are tested on both member counts. 0: off.
  static void SetSoloPeriodForTesting(uint32_t period);
  // Parallel runs so far that were switched to the caller alone (tests, diagnostics).
  uint64_t solo_runs() const { return solo_total_; }

 private:
  void Worker(uint32_t me);

  uint32_t size_;
  bool solo_ = false;         // the current Run is on the caller alone
  uint32_t busy_streak_ = 0;  // consecutive parallel runs that mostly waited
  uint32_t solo_left_ = 0;    // runs left in solo mode
  uint32_t solo_len_ = kSoloRuns;
  uint64_t solo_total_ = 0;
  uint64_t runs_ = 0;  // parallel-capable runs (the solo test hook's count)
  double waited_s_ = 0;  // caller's barrier waiting in the current Run
  std::thread::id caller_;
  TeamBarrier barrier_;
  std::vector<std::thread> workers_;
  const std::function<void(uint32_t, uint32_t)>* job_ = nullptr;
  alignas(64) std::atomic<uint32_t> job_generation_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace cact::kernels
