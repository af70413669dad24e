// Which BLAS libtorch's matrix products run on, and how many threads libtorch's intra-op
// pool (OpenMP) and the BLAS's own pool get, so that the two never oversubscribe the cores.
//
// Debian's libtorch calls BLAS through libblas.so.3, whatever the alternatives system points
// it at: the reference BLAS (netlib, single-threaded, ~10x slower) or OpenBLAS (its own
// pthread pool). Two pools that both take every core fight over them (needle2 prefill at
// 2 threads each ran slower than at 1), so one pool gets the threads and the other one.
//
// The rule (docs/cact-torch.md, "Threads and BLAS"): T = the -t request, or the CPUs this
// process may run on. OpenBLAS gets T threads; libtorch's intra-op pool gets 1 (the prefill
// is almost all matrix products, which libtorch hands to BLAS one at a time, and OpenMP's
// barriers between its many small parallel regions collapse whenever a core is taken), and
// its inter-op pool 1. A BLAS other than OpenBLAS keeps its own threads (the reference BLAS
// has one). A pool whose variable the user set keeps what the variable says:
// OPENBLAS_NUM_THREADS (or GOTO_NUM_THREADS) for OpenBLAS, OMP_NUM_THREADS for libtorch's
// intra-op pool; -t then only sizes the other pool.
#pragma once
#include <string>

namespace cact::torchscript {

// The library that defines sgemm_ for libtorch (the global-scope binding libtorch uses).
struct BlasLibrary {
  std::string path;    // that library, symlinks resolved ("" if no sgemm_ is loaded)
  std::string vendor;  // "OpenBLAS", "BLIS", "MKL", "reference" or "unknown"
  std::string config;  // openblas_get_config() for OpenBLAS, else ""
  int threads = -1;    // the BLAS's thread count now (OpenBLAS), -1 if it cannot tell
  bool optimised() const { return vendor == "OpenBLAS" || vendor == "BLIS" || vendor == "MKL"; }
};
BlasLibrary DescribeBlas();

// Where a pool's thread count came from.
struct ThreadSettings {
  int requested = 0;         // the -t request (0 = none)
  int total = 0;             // T: the request, or the CPUs available
  int torch_intra = 0;       // at::get_num_threads()
  int torch_interop = 0;     // at::get_num_interop_threads()
  int blas = -1;             // the BLAS's own threads (-1: unknown)
  std::string torch_source;  // "rule", "OMP_NUM_THREADS"
  std::string blas_source;   // "rule", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "not controlled"
};

// Applies the rule for `requested` threads (0 = the CPUs available) and returns what is now
// in effect. Every entry point of the bridge calls it once with 0 before libtorch runs
// anything (so a binary that never asks still gets cooperating pools); a later call with a
// request re-applies the rule for it.
ThreadSettings ConfigureThreads(int requested);
// The settings in effect (configuring with 0 first if nothing has yet).
ThreadSettings CurrentThreads();

// One line for stderr when libtorch runs on the reference (or an unrecognised) BLAS, else "".
std::string BlasWarning(const BlasLibrary& blas);
// "BLAS: VENDOR (PATH[, CONFIG]), N threads; libtorch intra-op M (SOURCE), inter-op K".
std::string DescribeThreads(const BlasLibrary& blas, const ThreadSettings& t);

}  // namespace cact::torchscript
