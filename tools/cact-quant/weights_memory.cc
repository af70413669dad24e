#include <cstdlib>
#include <filesystem>

#include "lib/heap_reserve.h"
#include "tools/cact-quant/commands.h"

namespace cact::quant_tool {

void ReserveForWeightsIn(const std::string& path) {
  if (const char* off = std::getenv("CACT_NO_HEAP_RESERVE"); off && *off && *off != '0') return;
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec) ReserveHugePageHeap(size_t(2 * size));
}

}  // namespace cact::quant_tool
