// cact-inspect CKPT.pkl: what an official training pickle holds (checkpoint or LoRA adapter),
// read through the restricted unpickler, and whether it builds into a .cact.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "quant/import/flax_checkpoint.h"
#include "tools/cact-inspect/commands.h"
#include "tools/cact-inspect/table.h"

namespace cact::inspect {
namespace {

using Json = nlohmann::ordered_json;

uint64_t ArrayBytes(const PickleArray& a) { return a.data.size(); }

std::string ShapeText(const PickleArray& a) {
  return absl::StrCat("[", absl::StrJoin(a.shape, ", "), "]");
}

Json ArraysJson(const std::vector<PickleArrayAt>& arrays) {
  Json out = Json::array();
  for (const PickleArrayAt& a : arrays)
    out.push_back({{"path", a.path},
                   {"dtype", PickleDtypeName(a.array->dtype)},
                   {"shape", a.array->shape},
                   {"order", a.array->fortran_order ? "F" : "C"},
                   {"bytes", ArrayBytes(*a.array)},
                   {"offset", a.offset}});
  return out;
}

void PrintArrays(const std::vector<PickleArrayAt>& arrays, bool markdown) {
  Table t({"path", "dtype", "shape", ">bytes"});
  for (const PickleArrayAt& a : arrays)
    t.Add({a.path + (a.array->fortran_order ? " (F order)" : ""), PickleDtypeName(a.array->dtype),
           ShapeText(*a.array), Thousands(ArrayBytes(*a.array))});
  t.Print(stdout, markdown, markdown ? "" : "  ");
}

// Totals by dtype: "458,752 float32 (1,835,008 bytes)".
std::string Totals(const std::vector<PickleArrayAt>& arrays) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> by;
  for (const PickleArrayAt& a : arrays) {
    auto& [n, b] = by[PickleDtypeName(a.array->dtype)];
    n += a.array->NumElements();
    b += ArrayBytes(*a.array);
  }
  std::vector<std::string> parts;
  for (const auto& [dt, nb] : by)
    parts.push_back(
        absl::StrFormat("%s %s (%s bytes)", Thousands(nb.first), dt, Thousands(nb.second)));
  return absl::StrJoin(parts, ", ");
}

int Checkpoint(const Options& o, const PickleDocument& doc) {
  absl::StatusOr<FlaxCheckpoint> c = ReadFlaxCheckpoint(doc);
  if (!c.ok()) return Fail(c.status());
  // Whether `cact-quant build --checkpoint` would accept it, and with what.
  Json build;
  absl::StatusOr<Geometry> g = CheckpointGeometry(*c);
  absl::StatusOr<CanonicalWeights> cw =
      g.ok() ? CheckpointToCanonical(*c, *g) : absl::StatusOr<CanonicalWeights>(g.status());
  if (cw.ok()) {
    build = {{"ok", true},
             {"tensors", cw->weights.tensors.size() + 1},
             {"bits_map", cw->weights.metadata["bits_map"]},
             {"kv_window", g->kv_window},
             {"unused", cw->unused}};
  } else {
    build = {{"ok", false}, {"error", std::string(cw.status().message())}};
  }
  const Json config = Json::parse(c->config_json);
  if (o.json) {
    Json j{{"file", doc.name()},   {"bytes", doc.size()},       {"protocol", doc.protocol()},
           {"kind", "checkpoint"}, {"format_version", nullptr}, {"step", nullptr},
           {"run", c->run},        {"config", config}};
    if (c->format_version) j["format_version"] = *c->format_version;
    if (c->step) j["step"] = *c->step;
    j["arrays"] = ArraysJson(c->params);
    j["cact_build"] = build;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  auto row = [](const char* k, const std::string& v) { std::printf("%-11s %s\n", k, v.c_str()); };
  row("file", absl::StrFormat("%s (%s bytes, pickle protocol %d)", doc.name(),
                              Thousands(doc.size()), doc.protocol()));
  row("kind", absl::StrFormat("Needle checkpoint (format_version %s, step %s%s)",
                              c->format_version ? absl::StrCat(*c->format_version) : "none",
                              c->step ? absl::StrCat(*c->step) : "none",
                              c->run.empty() ? "" : ", run " + c->run));
  std::vector<std::string> items;
  for (const auto& [k, v] : config.items()) items.push_back(k + " " + v.dump());
  row("config", absl::StrJoin(items, ", "));
  row("params", absl::StrFormat("%d arrays: %s", c->params.size(), Totals(c->params)));
  if (cw.ok())
    row(".cact",
        absl::StrFormat(
            "builds: %d tensors, scheme %s, kv_window %d%s", cw->weights.tensors.size() + 1,
            cw->weights.metadata["bits_map"], g->kv_window,
            cw->unused.empty() ? "" : absl::StrFormat(" (%d arrays unused)", cw->unused.size())));
  else
    row(".cact", "does not build: " + std::string(cw.status().message()));
  if (!o.no_tensors) {
    std::printf(o.markdown ? "\n### Arrays\n\n" : "\narrays\n");
    PrintArrays(c->params, o.markdown);
  }
  return 0;
}

int Adapter(const Options& o, const PickleDocument& doc) {
  absl::StatusOr<FlaxAdapter> a = ReadFlaxAdapter(doc);
  if (!a.ok()) return Fail(a.status());
  std::vector<PickleArrayAt> arrays;
  std::vector<std::string> targets;
  for (const FlaxAdapter::Target& t : a->targets) {
    arrays.push_back(t.a);
    arrays.push_back(t.b);
    targets.push_back(t.path);
  }
  if (o.json) {
    Json j{{"file", doc.name()},     {"bytes", doc.size()}, {"protocol", doc.protocol()},
           {"kind", "lora_adapter"}, {"rank", nullptr},     {"scale", a->scale},
           {"base", a->base},        {"targets", targets}};
    if (a->rank) j["rank"] = *a->rank;
    j["qat_bits"] = a->qat_bits ? Json(*a->qat_bits) : Json(nullptr);
    j["qat_bits_map"] = a->qat_bits_map ? Json(*a->qat_bits_map) : Json(nullptr);
    j["seed"] = a->seed ? Json(*a->seed) : Json(nullptr);
    Json extra = Json::object();
    for (const auto& [k, v] : a->extra) extra[k] = v;
    j["extra"] = extra;
    j["arrays"] = ArraysJson(arrays);
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  auto row = [](const char* k, const std::string& v) { std::printf("%-11s %s\n", k, v.c_str()); };
  row("file", absl::StrFormat("%s (%s bytes, pickle protocol %d)", doc.name(),
                              Thousands(doc.size()), doc.protocol()));
  std::vector<std::string> extra;
  for (const auto& [k, v] : a->extra) extra.push_back(k + " " + v);
  row("kind", absl::StrFormat("Needle LoRA adapter (rank %s, scale %g%s)",
                              a->rank ? absl::StrCat(*a->rank) : "?", a->scale,
                              extra.empty() ? "" : ", " + absl::StrJoin(extra, ", ")));
  row("base", a->base.empty() ? "(not recorded)" : a->base);
  row("qat", a->qat_bits_map ? "trained through the bits map " + *a->qat_bits_map +
                                   " (needle build deploys it)"
             : a->qat_bits   ? absl::StrFormat("trained through CQ W%d (needle build deploys it)",
                                               *a->qat_bits)
                             : std::string("none recorded (built with --bits, else the "
                                           "checkpoint's weight_bits)"));
  if (a->seed) row("seed", absl::StrCat(*a->seed));
  row("targets", absl::StrFormat("%d: %s", targets.size(), absl::StrJoin(targets, ", ")));
  row("arrays", Totals(arrays));
  if (!o.no_tensors) {
    std::printf(o.markdown ? "\n### Arrays\n\n" : "\narrays\n");
    PrintArrays(arrays, o.markdown);
  }
  return 0;
}

}  // namespace

int RunPickleInfo(const Options& o, FileBytes bytes) {
  absl::StatusOr<PickleDocument> doc = PickleDocument::Parse(std::move(bytes));
  if (!doc.ok()) return Fail(doc.status());
  absl::StatusOr<TrainingPickleKind> kind = ClassifyTrainingPickle(*doc);
  if (!kind.ok()) return Fail(kind.status());
  return *kind == TrainingPickleKind::kCheckpoint ? Checkpoint(o, *doc) : Adapter(o, *doc);
}

}  // namespace cact::inspect
