// cact-inspect verify: full validation (CactFile::Open validates everything) plus the file's
// SHA-256 and one SHA-256 per tensor blob. One-line verdict; exit 0 pass, 1 fail.
#include <cstdio>

#include "absl/strings/ascii.h"
#include "formats/cact/cact_file.h"
#include "lib/sha256.h"
#include "nlohmann/json.hpp"
#include "quant/cact_diff.h"
#include "tools/cact-inspect/commands.h"
#include "tools/cact-inspect/table.h"

namespace cact::inspect {

int RunVerify(const Options& o) {
  auto file = CactFile::Open(o.file);
  if (!file.ok()) {
    if (o.json) {
      nlohmann::ordered_json j{
          {"file", o.file}, {"ok", false}, {"error", std::string(file.status().message())}};
      std::printf("%s\n", j.dump(2).c_str());
    }
    std::fprintf(stderr, "FAIL %s\n", std::string(file.status().message()).c_str());
    return 1;
  }
  std::string sha = Sha256Hex(file->bytes().span());
  std::string want = absl::AsciiStrToLower(o.sha256);
  bool sha_ok = want.empty() || want == sha;
  if (o.json) {
    nlohmann::ordered_json j;
    j["file"] = o.file;
    j["ok"] = sha_ok;
    j["bytes"] = file->bytes().size();
    j["sha256"] = sha;
    if (!want.empty()) j["expected_sha256"] = want;
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
  } else {
    Table table({">#", "name", "type", ">offset", ">bytes", "sha256"});
    for (const TensorEntry& t : file->tensors())
      table.Add({std::to_string(t.index), t.name, TypeLabel(t.record),
                 std::to_string(t.record.offset), Thousands(t.record.nbytes),
                 Sha256Hex(file->blob(t))});
    table.Print(stdout, false);
  }
  if (!sha_ok) {
    std::fprintf(stderr, "FAIL %s: sha256 %s, expected %s\n", o.file.c_str(), sha.c_str(),
                 want.c_str());
    return 1;
  }
  std::fprintf(stderr, "OK %s: valid .cact, %zu tensors, %s bytes, sha256 %s%s\n", o.file.c_str(),
               file->tensors().size(), Thousands(file->bytes().size()).c_str(), sha.c_str(),
               want.empty() ? "" : " (matches)");
  return 0;
}

}  // namespace cact::inspect
