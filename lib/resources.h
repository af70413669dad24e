// Wall-clock timing and peak resident memory, for the timing lines every tool prints.
#pragma once
#include <chrono>
#include <cstdint>

namespace cact {

class Stopwatch {
 public:
  Stopwatch() : t0_(std::chrono::steady_clock::now()) {}
  void Reset() { t0_ = std::chrono::steady_clock::now(); }
  double Seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }
  double Millis() const { return Seconds() * 1e3; }
  // Seconds since the start, then restarts from that same instant (phase timing).
  double Lap() {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - t0_).count();
    t0_ = now;
    return s;
  }

 private:
  std::chrono::steady_clock::time_point t0_;
};

// CPU seconds this process has used, all threads together.
double ProcessCpuSeconds();

// Peak resident set size of this process in bytes (VmHWM), 0 if unknown.
uint64_t PeakRssBytes();
// Current resident set size in bytes (VmRSS), 0 if unknown.
uint64_t CurrentRssBytes();

}  // namespace cact
