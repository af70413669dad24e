#include "lib/resources.h"

#include <cstdio>
#include <cstring>
#include <ctime>

namespace cact {

static uint64_t StatusField(const char* key) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  uint64_t kb = 0;
  size_t klen = std::strlen(key);
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, key, klen) == 0) {
      std::sscanf(line + klen, " %lu", reinterpret_cast<unsigned long*>(&kb));
      break;
    }
  }
  std::fclose(f);
  return kb * 1024;
}

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

uint64_t PeakRssBytes() { return StatusField("VmHWM:"); }
uint64_t CurrentRssBytes() { return StatusField("VmRSS:"); }

}  // namespace cact
