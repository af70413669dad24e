// Corpus manifest parser over arbitrary text. An accepted manifest formats back to the same
// text (plus the final newline it may lack) and parses to the same entries; a rejected one
// names the manifest. Text normalisation, run on the same bytes, is idempotent.
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "train/corpus.h"
#include "train/corpus_manifest.h"

using namespace cact;
using namespace cact::train;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string normal = NormalizeText(text);
  CACT_FUZZ_CHECK(NormalizeText(normal) == normal, "normalisation is idempotent");
  CACT_FUZZ_CHECK(!IsValidUtf8(text) || IsValidUtf8(normal),
                  "normalising valid UTF-8 keeps it valid");
  const std::string collapsed = NormalizeText(text, Spacing::kCollapse);
  CACT_FUZZ_CHECK(NormalizeText(collapsed, Spacing::kCollapse) == collapsed,
                  "collapsing normalisation is idempotent");
  CACT_FUZZ_CHECK(collapsed.find("  ") == std::string::npos &&
                      collapsed.find('\t') == std::string::npos &&
                      collapsed.find("\n ") == std::string::npos &&
                      collapsed.find(" \n") == std::string::npos && collapsed.rfind(' ', 0) != 0,
                  "collapsed text has no runs, tabs, or spaces at a line's ends");
  CACT_FUZZ_CHECK(!IsValidUtf8(text) || IsValidUtf8(collapsed),
                  "collapsing valid UTF-8 keeps it valid");
  auto m = ParseManifest(text, "fuzz");
  if (!m.ok()) {
    CACT_FUZZ_CHECK(m.status().message().rfind("fuzz:", 0) == 0, "error names the manifest");
    return 0;
  }
  auto formatted = FormatManifest(*m);
  CACT_FUZZ_CHECK(formatted.ok(), "an accepted manifest formats");
  CACT_FUZZ_CHECK(*formatted == text || *formatted == text + "\n", "canonical text");
  auto again = ParseManifest(*formatted, "fuzz");
  CACT_FUZZ_CHECK(again.ok() && *again == *m, "formatted manifest parses to the same entries");
  for (const ManifestEntry& e : *m)
    CACT_FUZZ_CHECK(e.sha256.size() == 64 && !e.path.empty(), "entry fields");
  return 0;
}
