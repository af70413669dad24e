// cact-inspect verify: full validation (either generation's validator), every
// stored float finite (formats/cact/finite_check.h), the file's SHA-256 against --sha256,
// and with --tensors one SHA-256 per tensor blob. A one-line verdict on stderr; exit 0 pass,
// 1 the file fails a check, 2 the command cannot run (no such file, a bad flag).
#include <cstdio>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "formats/cact/any_generation.h"
#include "formats/cact/cact_file.h"
#include "formats/cact/finite_check.h"
#include "lib/resources.h"
#include "lib/sha256.h"
#include "nlohmann/json.hpp"
#include "quant/cact_diff.h"
#include "tools/cact-inspect/commands.h"
#include "tools/cact-inspect/table.h"

namespace cact::inspect {
namespace {

// How many non-finite values are listed one by one (all are counted).
constexpr size_t kNonFiniteListed = 20;

int FailVerdict(const Options& o, const std::string& message) {
  if (o.json) {
    nlohmann::ordered_json j{{"file", o.file}, {"ok", false}, {"error", message}};
    std::printf("%s\n", j.dump(2).c_str());
  }
  std::fprintf(stderr, "FAIL %s\n", message.c_str());
  return 1;
}

}  // namespace

int RunVerify(const Options& o) {
  // A file that is not there is a wrong command line, not a damaged file.
  std::error_code ec;
  if (!std::filesystem::exists(o.file, ec))
    return Fail(absl::NotFoundError(o.file + ": no such file"));
  auto opened = OpenAnyGeneration(o.file);
  if (!opened.ok()) return FailVerdict(o, std::string(opened.status().message()));
  const CactFile* file = &opened->records();  // generation 3: its records, blobs, codebooks

  uint64_t non_finite_total = 0;
  const Stopwatch finite_clock;
  const std::vector<NonFiniteValue> non_finite =
      FindNonFinite(*file, kNonFiniteListed, &non_finite_total);
  const double finite_check_ms = finite_clock.Millis();
  const std::string sha = Sha256Hex(file->bytes().span());
  const std::string want = absl::AsciiStrToLower(o.sha256);
  const bool sha_ok = want.empty() || want == sha;
  const bool ok = sha_ok && non_finite_total == 0;
  if (o.json) {
    nlohmann::ordered_json j;
    j["file"] = o.file;
    j["generation"] = opened->generation();
    j["ok"] = ok;
    j["bytes"] = file->bytes().size();
    j["sha256"] = sha;
    if (!want.empty()) j["expected_sha256"] = want;
    j["non_finite_count"] = non_finite_total;
    j["finite_check_ms"] = finite_check_ms;  // the check every computing command makes
    nlohmann::ordered_json nf = nlohmann::ordered_json::array();
    for (const NonFiniteValue& v : non_finite)
      nf.push_back({{"record", v.record},
                    {"tensor", v.tensor},
                    {v.group_norm ? "group" : "element", v.index},
                    {"byte_offset", v.byte_offset},
                    {"value", v.value}});
    j["non_finite"] = nf;
    nlohmann::ordered_json ts = nlohmann::ordered_json::array();
    for (const TensorEntry& t : file->tensors())
      ts.push_back({{"index", t.index},
                    {"name", t.name},
                    {"type", TypeLabel(t.record)},
                    {"offset", t.record.offset},
                    {"bytes", t.record.nbytes},
                    {"sha256", Sha256Hex(file->blob(t))}});
    j["tensors"] = ts;
    std::printf("%s\n", j.dump(2).c_str());
  } else if (o.tensors) {
    Table table({">#", "name", "type", ">offset", ">bytes", "sha256"});
    for (const TensorEntry& t : file->tensors())
      table.Add({std::to_string(t.index), t.name, TypeLabel(t.record),
                 Thousands(t.record.offset), Thousands(t.record.nbytes),
                 Sha256Hex(file->blob(t))});
    table.Print(stdout, false);
  }
  if (non_finite_total) {
    for (const NonFiniteValue& v : non_finite)
      std::fprintf(stderr, "non-finite: %s\n", v.Describe().c_str());
    if (non_finite_total > non_finite.size())
      std::fprintf(stderr, "non-finite: ... and %llu more\n",
                   (unsigned long long)(non_finite_total - non_finite.size()));
    std::fprintf(stderr, "FAIL %s: %llu non-finite value%s (a model must hold finite values "
                 "only)\n",
                 o.file.c_str(), (unsigned long long)non_finite_total,
                 non_finite_total == 1 ? "" : "s");
  }
  if (!sha_ok)
    std::fprintf(stderr, "FAIL %s: sha256 %s, expected %s\n", o.file.c_str(), sha.c_str(),
                 want.c_str());
  if (!ok) return 1;
  std::fprintf(stderr, "OK %s: valid .cact%s, %zu tensors, every value finite, %s bytes, "
               "sha256 %s%s\n",
               o.file.c_str(), opened->generation() == 3 ? " (generation 3)" : "",
               file->tensors().size(), Thousands(file->bytes().size()).c_str(), sha.c_str(),
               want.empty() ? "" : " (matches)");
  return 0;
}

}  // namespace cact::inspect
