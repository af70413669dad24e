// `cact-torch import` on damaged .pt (TorchScript zip) files: the input bytes are written to
// a file under /dev/shm and imported with ImportToCact, the call `cact-torch import IN -o
// OUT.cact` makes (sniffing, torch::jit::load, reading the carried source, planning the
// return, atomic write). Properties: no crash, no escaping exception, a failed import leaves
// no output, a successful one writes a .cact that the format library accepts and whose
// every record reads back (fuzz_common.h).
//
// The custom mutator handles two in three mutations by member: it mutates one zip member's
// content and writes the archive back with correct CRC-32s, so the mutation reaches the
// pickle / code / carried buffers (the import checks CRC-32s first, engine/torchscript/
// archive_check.h, so a raw byte flip inside a member stops there). The other mutations are
// libFuzzer's own, on the raw bytes (truncations, directory damage).
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>

#include "libtorch/bridge.h"
#include "libtorch/torch_module.h"
#include "formats/cact/cact_file.h"
#include "fuzz_common.h"
#include "zip_members.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

// /dev/shm/fuzz_torch_import.PID, removed at exit; directories left by processes that died
// (crashes, fork-mode jobs killed on a timeout) are removed when the next one starts.
const std::string& WorkDir() {
  static const std::string dir = [] {
    namespace fs = std::filesystem;
    const std::string prefix = "fuzz_torch_import.";
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/dev/shm", ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind(prefix, 0) != 0) continue;
      const long pid = std::atol(name.c_str() + prefix.size());
      if (pid > 0 && kill(pid_t(pid), 0) != 0 && errno == ESRCH) fs::remove_all(e.path(), ec);
    }
    std::string d = "/dev/shm/" + prefix + std::to_string(getpid());
    fs::create_directories(d);
    // The exit handler owns its copy: it runs after this static string is destroyed.
    static const char* const to_remove = strdup(d.c_str());
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(to_remove, ignored);
    });
    return d;
  }();
  return dir;
}

bool WriteInput(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  cact::torchscript::TorchModel::SetThreads(1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  const std::string in = WorkDir() + "/in.pt", out = WorkDir() + "/out.cact";
  CACT_FUZZ_CHECK(WriteInput(in, data, size), "input written to /dev/shm");
  std::error_code ec;
  fs::remove(out, ec);

  cact::torchscript::ImportRequest req;
  req.input = in;
  req.output = out;
  absl::StatusOr<cact::torchscript::ReturnResult> r;
  try {
    r = cact::torchscript::ImportToCact(req);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "exception escaped ImportToCact: %s\n", e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "non-std exception escaped ImportToCact\n");
    std::abort();
  }
  static const bool verbose = std::getenv("CACT_FUZZ_VERBOSE") != nullptr;
  if (verbose) {
    std::fprintf(stderr, "import: %s\n",
                 r.ok() ? ("ok, " + std::to_string(r->kept()) + " kept, " +
                           std::to_string(r->changed()) + " changed")
                              .c_str()
                        : std::string(r.status().message()).c_str());
  }
  if (!r.ok()) {
    CACT_FUZZ_CHECK(!r.status().message().empty(), "an error says what is wrong");
    CACT_FUZZ_CHECK(!fs::exists(out), "a failed import leaves no output");
    return 0;
  }
  auto written = cact::CactFile::Open(out);
  if (!written.ok()) std::fprintf(stderr, "%s\n", std::string(written.status().message()).c_str());
  CACT_FUZZ_CHECK(written.ok(), "a successful import writes a valid .cact");
  CACT_FUZZ_CHECK(r->decisions.size() <= written->tensors().size(),
                  "at most one decision per record");
  cact::fuzz::TouchCactFile(*written);  // every value, blob and the tokenizer of the output
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  std::minstd_rand rng(seed);
  if (rng() % 3 == 0) return LLVMFuzzerMutate(data, size, max_size);
  auto members = cact::fuzz::ReadZip(data, size);
  if (!members || members->empty()) return LLVMFuzzerMutate(data, size, max_size);
  // Half the time the members our import interprets (the pickle holding cact_json and the
  // module tree, the code, the small records); otherwise any member, carried buffers included.
  size_t pick = rng() % members->size();
  if (rng() % 2 == 0) {
    std::vector<size_t> small;
    for (size_t i = 0; i < members->size(); ++i)
      if ((*members)[i].data.size() <= 64 || (*members)[i].name.find("data/") == std::string::npos)
        small.push_back(i);
    if (!small.empty()) pick = small[rng() % small.size()];
  }
  std::vector<uint8_t>& m = (*members)[pick].data;
  const size_t old = m.size();
  m.resize(old + old / 8 + 64);
  m.resize(LLVMFuzzerMutate(m.data(), old, m.size()));
  const std::vector<uint8_t> rebuilt = cact::fuzz::WriteZip(*members);
  if (rebuilt.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::copy(rebuilt.begin(), rebuilt.end(), data);
  return rebuilt.size();
}
