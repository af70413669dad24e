// cact-inspect tokens: the tokenizer pieces (id, type, score, surface).
#include <cstdio>

#include "formats/cact/any_generation.h"
#include "formats/cact/cact_file.h"
#include "formats/tokenizer_blob.h"
#include "nlohmann/json.hpp"
#include "tools/cact-inspect/commands.h"
#include "tools/cact-inspect/table.h"

namespace cact::inspect {

static const char* TypeName(PieceType t) {
  switch (t) {
    case PieceType::kNormal:
      return "normal";
    case PieceType::kUnknown:
      return "unknown";
    case PieceType::kControl:
      return "control";
    case PieceType::kUserDefined:
      return "user";
    case PieceType::kByte:
      return "byte";
  }
  return "?";
}

int RunTokens(const Options& o) {
  auto opened = OpenAnyGeneration(o.file);
  if (!opened.ok()) return Fail(opened.status());
  const CactFile* file = &opened->records();  // the tokenizer blob is the same in both
  const TensorEntry& raw = file->tensors().back();
  auto tok = ParseTokenizerBlob(file->tokenizer_blob(), o.file, raw.record.offset);
  if (!tok.ok()) return Fail(tok.status());
  if (o.json) {
    nlohmann::ordered_json j;
    j["pad_id"] = tok->pad_id;
    j["eos_id"] = tok->eos_id;
    j["bos_id"] = tok->bos_id;
    j["unk_id"] = tok->unk_id;
    j["add_dummy_prefix"] = bool(tok->add_dummy_prefix);
    j["byte_fallback"] = bool(tok->byte_fallback);
    auto& ps = j["pieces"] = nlohmann::ordered_json::array();
    for (size_t i = 0; i < tok->pieces.size(); ++i) {
      const auto& p = tok->pieces[i];
      ps.push_back(
          {{"id", i}, {"piece", p.surface}, {"type", TypeName(p.type)}, {"score", p.score}});
    }
    std::printf("%s\n", j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("%zu pieces; pad %u, eos %u, bos %u, unk %u; add_dummy_prefix %d, byte_fallback %d\n",
              tok->pieces.size(), tok->pad_id, tok->eos_id, tok->bos_id, tok->unk_id,
              tok->add_dummy_prefix, tok->byte_fallback);
  Table table({">id", "type", ">score", "piece"});
  for (size_t i = 0; i < tok->pieces.size(); ++i) {
    const auto& p = tok->pieces[i];
    char score[32];
    std::snprintf(score, sizeof score, "%.4g", p.score);
    table.Add({std::to_string(i), TypeName(p.type), score, p.surface});
  }
  table.Print(stdout, false);
  return 0;
}

}  // namespace cact::inspect
