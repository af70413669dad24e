// The BLAS libtorch runs on and the thread rule of libtorch/blas_threads.h: in this
// process (which links libtorch like cact-torch), and through `cact-torch info` under
// chosen environments (a thread variable set, the reference BLAS forced by LD_LIBRARY_PATH).
#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "libtorch/blas_threads.h"
#include "lib/cpu_features.h"
#include "torch_test_util.h"

namespace cact::testing {
namespace {

using torchscript::BlasLibrary;
using torchscript::ThreadSettings;

std::string Canonical(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::canonical(path, ec);
  return ec ? "" : p.string();
}

// The libblas.so.3 this process loaded (libtorch_cpu needs it), symlinks resolved.
std::string LoadedLibblas() {
  void* h = dlopen("libblas.so.3", RTLD_LAZY | RTLD_NOLOAD);
  if (h == nullptr) return "";
  link_map* map = nullptr;
  std::string path;
  if (dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr) path = Canonical(map->l_name);
  dlclose(h);
  return path;
}

// Where Debian's alternatives point libblas.so.3 ("" without the alternatives system).
std::string AlternativeLibblas() {
  return Canonical("/etc/alternatives/libblas.so.3-x86_64-linux-gnu");
}

bool Set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::atoi(v) > 0;
}

// What the rule says for a request, in this process's environment.
void ExpectRule(const ThreadSettings& t, const BlasLibrary& blas, int requested) {
  const int total = requested > 0 ? requested : AvailableCpus();
  const bool openblas = blas.vendor == "OpenBLAS";
  EXPECT_EQ(t.total, total);
  if (Set("OPENBLAS_NUM_THREADS")) {
    EXPECT_EQ(t.blas_source, "OPENBLAS_NUM_THREADS");
  } else if (Set("GOTO_NUM_THREADS")) {
    EXPECT_EQ(t.blas_source, "GOTO_NUM_THREADS");
  } else if (openblas) {
    EXPECT_EQ(t.blas_source, "rule");
    EXPECT_EQ(t.blas, total);
  }
  if (Set("OMP_NUM_THREADS")) {
    EXPECT_EQ(t.torch_source, "OMP_NUM_THREADS");
    EXPECT_EQ(t.torch_intra, std::atoi(std::getenv("OMP_NUM_THREADS")));
  } else {
    EXPECT_EQ(t.torch_source, "rule");
    EXPECT_EQ(t.torch_intra, 1);
  }
  EXPECT_EQ(t.torch_interop, 1);
}

TEST(TorchBlas, IsTheLibraryTheAlternativesPointAt) {
  const BlasLibrary blas = torchscript::DescribeBlas();
  const std::string loaded = LoadedLibblas();
  ASSERT_FALSE(loaded.empty()) << "libtorch's libblas.so.3 is not loaded";
  // sgemm_ binds to the libblas.so.3 libtorch_cpu needs, not to some other BLAS in the process.
  EXPECT_EQ(blas.path, loaded);
  const std::string alternative = AlternativeLibblas();
  if (!alternative.empty() && std::getenv("LD_LIBRARY_PATH") == nullptr) {
    EXPECT_EQ(loaded, alternative);
  }
  if (loaded.find("openblas") != std::string::npos) {
    EXPECT_EQ(blas.vendor, "OpenBLAS") << blas.path;
    EXPECT_EQ(blas.config.rfind("OpenBLAS ", 0), 0u) << blas.config;
    EXPECT_GE(blas.threads, 1);
    EXPECT_EQ(torchscript::BlasWarning(blas), "");
  } else if (loaded.find("/blas/libblas.so") != std::string::npos) {
    EXPECT_EQ(blas.vendor, "reference") << blas.path;
    EXPECT_NE(torchscript::BlasWarning(blas), "");
  }
}

// The bridge applies the rule before libtorch runs anything, in every binary: this one too.
TEST(TorchBlas, ThreadRuleInThisProcess) {
  ASSERT_NE(Exported("tiny").model, nullptr);  // loading goes through the bridge
  const BlasLibrary blas = torchscript::DescribeBlas();
  ExpectRule(torchscript::CurrentThreads(), blas, 0);
  for (int requested : {1, 2, 0}) {
    SCOPED_TRACE(requested);
    ExpectRule(torchscript::ConfigureThreads(requested), blas, requested);
    ExpectRule(torchscript::CurrentThreads(), blas, requested);
  }
}

// `cact-torch info --json` under `env` (stderr kept apart from the JSON).
nlohmann::json Info(const TempDir& dir, const std::string& env, const std::string& args,
                    std::string* err) {
  const std::string err_path = dir / "err.txt";
  CommandResult r = cact::testing::Run(
      "(env -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS "
      "-u GOTO_NUM_THREADS " +
      env + " " + Tool("cact-torch") + " info --json " + args + " 2>" + err_path + ")");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::vector<uint8_t> err_bytes = ReadAll(err_path);
  err->assign(err_bytes.begin(), err_bytes.end());
  nlohmann::json j = nlohmann::json::parse(r.output, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.output;
  return j;
}

TEST(TorchBlas, CactTorchInfoFollowsTheRule) {
  const BlasLibrary blas = torchscript::DescribeBlas();
  if (blas.vendor != "OpenBLAS") {
    ADD_FAILURE() << "libtorch is on " << blas.vendor << " (" << blas.path
                  << "): setup.sh installs libopenblas0-pthread";
    return;
  }
  TempDir dir;
  std::string err;
  for (int t : {1, 2}) {
    nlohmann::json j = Info(dir, "", "-t " + std::to_string(t), &err);
    EXPECT_EQ(j["blas"]["vendor"], "OpenBLAS") << j;
    EXPECT_EQ(j["blas"]["threads"], t) << j;
    EXPECT_EQ(j["blas"]["threads_from"], "rule") << j;
    EXPECT_EQ(j["torch"]["intra_op"], 1) << j;
    EXPECT_EQ(j["torch"]["intra_op_from"], "rule") << j;
    EXPECT_EQ(j["torch"]["inter_op"], 1) << j;
    EXPECT_EQ(err, "") << "no warning on OpenBLAS";
  }
  // No -t: the CPUs available.
  nlohmann::json all = Info(dir, "", "", &err);
  EXPECT_EQ(all["blas"]["threads"], AvailableCpus()) << all;
  // A variable the user set keeps its pool, whatever -t says; the other pool follows the rule.
  nlohmann::json pinned = Info(dir, "OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=2", "-t 2", &err);
  EXPECT_EQ(pinned["blas"]["threads"], 1) << pinned;
  EXPECT_EQ(pinned["blas"]["threads_from"], "OPENBLAS_NUM_THREADS") << pinned;
  EXPECT_EQ(pinned["torch"]["intra_op"], 2) << pinned;
  EXPECT_EQ(pinned["torch"]["intra_op_from"], "OMP_NUM_THREADS") << pinned;
  nlohmann::json omp_only = Info(dir, "OMP_NUM_THREADS=1", "-t 2", &err);
  EXPECT_EQ(omp_only["blas"]["threads"], 2) << omp_only;
  EXPECT_EQ(omp_only["torch"]["intra_op"], 1) << omp_only;
  EXPECT_EQ(omp_only["torch"]["intra_op_from"], "OMP_NUM_THREADS") << omp_only;
}

// On the reference BLAS (forced here by LD_LIBRARY_PATH) cact-torch names it and warns.
TEST(TorchBlas, ReferenceBlasIsNamedAndWarnedAbout) {
  const std::string reference_dir = "/usr/lib/x86_64-linux-gnu/blas";
  if (!std::filesystem::exists(reference_dir + "/libblas.so.3")) {
    GTEST_SKIP() << "Debian's reference BLAS (libblas3) is not installed";
  }
  TempDir dir;
  std::string err;
  nlohmann::json j = Info(dir, "LD_LIBRARY_PATH=" + reference_dir, "-t 2", &err);
  EXPECT_EQ(j["blas"]["vendor"], "reference") << j;
  EXPECT_EQ(j["blas"]["library"].get<std::string>().rfind(reference_dir + "/libblas.so", 0), 0u)
      << j;
  EXPECT_EQ(j["blas"]["threads"], 1) << j;
  EXPECT_EQ(j["torch"]["intra_op"], 1) << j;
  EXPECT_EQ(err.rfind("warning: libtorch's BLAS is the reference BLAS", 0), 0u) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  // `run` warns only once the model has loaded: an error stays the only line.
  CommandResult bad =
      cact::testing::Run("LD_LIBRARY_PATH=" + reference_dir + " " + Tool("cact-torch") + " run " +
                         (dir / "missing.pt") + " --tokens 2,17,40");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_EQ(std::count(bad.output.begin(), bad.output.end(), '\n'), 1) << bad.output;
}

}  // namespace
}  // namespace cact::testing
