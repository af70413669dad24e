// A small persistent thread team for the fast path: Run(fn) executes fn(me, nt) on every
// member (the caller is member 0) and returns when all are done; Barrier() synchronises
// the members inside fn. Waiting spins for a few microseconds, then sleeps on a futex
// (std::atomic::wait): cheap on an idle machine, and it does not burn the CPU a
// descheduled partner needs when the machine is oversubscribed (OpenMP's default
// barriers spin for a long time and degrade to milliseconds per barrier there).
#pragma once
#include <atomic>
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

  uint32_t size() const { return size_; }
  void Run(const std::function<void(uint32_t me, uint32_t nt)>& fn);
  void Barrier() { barrier_.Wait(); }

 private:
  void Worker(uint32_t me);

  uint32_t size_;
  TeamBarrier barrier_;
  std::vector<std::thread> workers_;
  const std::function<void(uint32_t, uint32_t)>* job_ = nullptr;
  alignas(64) std::atomic<uint32_t> job_generation_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace cact::kernels
