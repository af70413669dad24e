#include "tools/common/stdout_check.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace cact::tools {
namespace {

char g_tool[64] = "cact";

void CloseStdout() {
  errno = 0;
  const bool failed = std::ferror(stdout) != 0;
  const int saved = errno;
  const bool flush_failed = std::fflush(stdout) != 0;
  const int flush_errno = errno;
  const bool close_failed = std::fclose(stdout) != 0;
  if (!failed && !flush_failed && !close_failed) return;
  const int e = flush_failed ? flush_errno : (close_failed ? errno : saved);
  std::fprintf(stderr, "%s: standard output: write failed%s%s\n", g_tool, e ? ": " : "",
               e ? std::strerror(e) : "");
  std::_Exit(2);
}

}  // namespace

void CheckStdoutAtExit(std::string_view tool) {
  static bool registered = false;
  const size_t n = std::min(tool.size(), sizeof(g_tool) - 1);
  std::memcpy(g_tool, tool.data(), n);
  g_tool[n] = '\0';
  if (registered) return;
  registered = true;
  std::signal(SIGPIPE, SIG_IGN);
  std::atexit(CloseStdout);
}

}  // namespace cact::tools
