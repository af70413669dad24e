#include "quant/import/flax_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "lib/status.h"
#include "nlohmann/json.hpp"
#include "quant/cq/fp16.h"
#include "quant/weights_geometry.h"

namespace cact {
namespace {

using Kind = PickleObject::Kind;

std::string ShapeText(const std::vector<uint64_t>& s) {
  return absl::StrCat("[", absl::StrJoin(s, ", "), "]");
}

absl::Status At(const std::string& file, const std::string& path, const PickleObject& o,
                const std::string& what) {
  return FormatError(file, path, o.offset, what);
}

absl::StatusOr<const PickleObject*> RootDict(const PickleDocument& doc) {
  const PickleObject& root = doc.root();
  if (root.kind != Kind::kDict)
    return At(doc.name(), "pickle root", root,
              absl::StrCat("is a ", root.TypeName(), "; a checkpoint or adapter is a dict"));
  return &root;
}

// Collects every array under `o` with its "/"-joined path; dict keys must be strings.
absl::Status CollectArrays(const std::string& file, const PickleObject& o, const std::string& path,
                           int depth, std::vector<PickleArrayAt>* out) {
  if (depth > kPickleMaxWalkDepth)
    return At(file, path, o, absl::StrFormat("nested deeper than %d levels", kPickleMaxWalkDepth));
  if (o.kind == Kind::kArray) {
    out->push_back({path, o.array, o.offset});
    return absl::OkStatus();
  }
  if (o.kind != Kind::kDict)
    return At(file, path, o, absl::StrCat("is a ", o.TypeName(), ", not an array or a dict"));
  for (const auto& [k, v] : o.entries) {
    if (k->kind != Kind::kStr)
      return At(file, path, *k, absl::StrCat("has a ", k->TypeName(), " key; keys are strings"));
    CACT_RETURN_IF_ERROR(
        CollectArrays(file, *v, absl::StrCat(path, "/", std::string(k->text)), depth + 1, out));
  }
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> ToJson(const std::string& file, const PickleObject& o,
                                      const std::string& path, int depth) {
  if (depth > kPickleMaxWalkDepth)
    return At(file, path, o, absl::StrFormat("nested deeper than %d levels", kPickleMaxWalkDepth));
  switch (o.kind) {
    case Kind::kNone:
      return nlohmann::json(nullptr);
    case Kind::kBool:
      return nlohmann::json(o.b);
    case Kind::kInt:
      return nlohmann::json(o.i);
    case Kind::kFloat:
      return nlohmann::json(o.f);
    case Kind::kStr:
      return nlohmann::json(std::string(o.text));
    case Kind::kList:
    case Kind::kTuple:
    case Kind::kSet: {
      nlohmann::json a = nlohmann::json::array();
      for (size_t i = 0; i < o.items.size(); ++i) {
        CACT_ASSIGN_OR_RETURN(nlohmann::json v, ToJson(file, *o.items[i],
                                                       absl::StrCat(path, "[", i, "]"), depth + 1));
        a.push_back(std::move(v));
      }
      return a;
    }
    case Kind::kDict: {
      nlohmann::json d = nlohmann::json::object();
      for (const auto& [k, v] : o.entries) {
        if (k->kind != Kind::kStr)
          return At(file, path, *k, absl::StrCat("has a ", k->TypeName(), " key"));
        const std::string key(k->text);
        CACT_ASSIGN_OR_RETURN(d[key], ToJson(file, *v, path + "/" + key, depth + 1));
      }
      return d;
    }
    default:
      return At(file, path, o, absl::StrCat("is a ", o.TypeName(), "; expected plain data"));
  }
}

// A top-level scalar as display text.
std::string ScalarText(const PickleObject& o) {
  switch (o.kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return o.b ? "True" : "False";
    case Kind::kInt:
      return absl::StrCat(o.i);
    case Kind::kFloat:
      return absl::StrFormat("%.17g", o.f);
    case Kind::kStr:
      return std::string(o.text);
    default:
      return absl::StrCat("<", o.TypeName(), ">");
  }
}

// A number however Python code tends to store it: an int, a float, or a one-element array
// (`jnp.float32(x)` and numpy scalars reach pickles as 0-d arrays or numpy scalars).
std::optional<double> Number(const PickleObject& o) {
  if (o.kind == Kind::kInt) return double(o.i);
  if (o.kind == Kind::kFloat) return o.f;
  if (o.kind != Kind::kArray || o.array->NumElements() != 1) return std::nullopt;
  const uint8_t* p = o.array->data.data();
  auto load = [p](auto v) {
    std::memcpy(&v, p, sizeof v);
    return double(v);
  };
  switch (o.array->dtype) {
    case PickleDtype::kF16:
      return double(LoadHalf(p));
    case PickleDtype::kF32:
      return load(float());
    case PickleDtype::kF64:
      return load(double());
    case PickleDtype::kI32:
      return load(int32_t());
    case PickleDtype::kI64:
      return load(int64_t());
    case PickleDtype::kU32:
      return load(uint32_t());
    default:
      return std::nullopt;
  }
}

// Descriptive integers (step, format_version, rank): absent or unreadable is no error.
std::optional<int64_t> DescriptiveInt(const PickleObject& d, const char* key) {
  const PickleObject* v = d.Find(key);
  if (!v) return std::nullopt;
  std::optional<double> x = Number(*v);
  if (!x || *x != std::floor(*x) || std::abs(*x) > 9e15) return std::nullopt;
  return int64_t(*x);
}

// The config's weight_bits as a scheme: a bits map string as is, an int width N as
// "default=N"; "" / None / absent name none.
absl::StatusOr<std::string> WeightBitsScheme(const std::string& file, const PickleObject& config) {
  const PickleObject* v = config.Find("weight_bits");
  if (!v || v->kind == Kind::kNone) return std::string();
  if (v->kind == Kind::kStr) return std::string(v->text);
  if (v->kind == Kind::kInt) return absl::StrCat("default=", v->i);
  if (v->kind == Kind::kFloat) return absl::StrFormat("default=%g", v->f);
  return At(file, "config/weight_bits", *v,
            absl::StrCat("is a ", v->TypeName(), "; expected a bits map string or a width"));
}

// The arrays the exporter reads are float16 or float32 (it widens both to float32).
absl::Status CheckFloatArray(const std::string& file, const PickleArrayAt& at) {
  if (at.array->dtype == PickleDtype::kF16 || at.array->dtype == PickleDtype::kF32)
    return absl::OkStatus();
  return FormatError(file, at.path, at.offset,
                     absl::StrCat("is ", PickleDtypeName(at.array->dtype),
                                  "; the exporter reads float16 or float32 arrays"));
}

// Element `k` (in storage order) of a float16 / float32 array.
float FloatAt(const PickleArray& a, uint64_t k) {
  const uint8_t* p = a.data.data();
  return a.dtype == PickleDtype::kF16 ? LoadHalf(p + 2 * k) : LoadF32(p + 4 * k);
}

// Elements of a float16 / float32 array as float32, in C order.
absl::StatusOr<std::vector<float>> ArrayFloats(const std::string& file, const PickleArrayAt& at) {
  CACT_RETURN_IF_ERROR(CheckFloatArray(file, at));
  const PickleArray& a = *at.array;
  const uint64_t n = a.NumElements();
  std::vector<float> c(n);
  if (!a.fortran_order || a.shape.size() < 2) {
    for (uint64_t k = 0; k < n; ++k) c[k] = FloatAt(a, k);
    return c;
  }
  // Column-major data: walk the C-order index and keep the column-major offset in step.
  const size_t nd = a.shape.size();
  std::vector<uint64_t> fstride(nd, 1), idx(nd, 0);
  for (size_t d = 1; d < nd; ++d) fstride[d] = fstride[d - 1] * a.shape[d - 1];
  uint64_t f = 0;
  for (uint64_t k = 0; k < n; ++k) {
    c[k] = FloatAt(a, f);
    for (size_t d = nd; d-- > 0;) {
      if (++idx[d] < a.shape[d]) {
        f += fstride[d];
        break;
      }
      f -= fstride[d] * (a.shape[d] - 1);
      idx[d] = 0;
    }
  }
  return c;
}

// numpy's float32 -> float16 -> float32 (round to nearest even).
float AsHalf(float f) { return HalfToFloat(FloatToHalf(f)); }

// Reads the arrays the exporter needs, checking each against the shape the config implies.
class ParamReader {
 public:
  explicit ParamReader(const FlaxCheckpoint& ckpt) : file_(ckpt.file) {
    for (const PickleArrayAt& p : ckpt.params) by_path_[p.path] = &p;
  }

  // An array the exporter reads, in C order: its float16 / float32 bytes in the pickle, read
  // in place; a Fortran-ordered array is converted once into `owned`.
  struct Source {
    const PickleArrayAt* at = nullptr;
    std::vector<float> owned;
    uint64_t size = 0;
    float operator[](uint64_t k) const { return owned.empty() ? FloatAt(*at->array, k) : owned[k]; }
    // FloatTensor::stored_dtype of what is made from it.
    const char* dtype() const { return at->array->dtype == PickleDtype::kF16 ? "F16" : "F32"; }
  };

  absl::StatusOr<Source> Get(const std::string& path, const std::vector<uint64_t>& shape) {
    const std::string full = "params/" + path;
    auto it = by_path_.find(full);
    if (it == by_path_.end())
      return FileError(file_, absl::StrFormat("%s is missing (the config implies an array of "
                                              "shape %s)",
                                              full, ShapeText(shape)));
    const PickleArrayAt& at = *it->second;
    if (at.array->shape != shape)
      return FormatError(file_, full, at.offset,
                         absl::StrFormat("has shape %s; the config implies %s",
                                         ShapeText(at.array->shape), ShapeText(shape)));
    used_.insert(full);
    CACT_RETURN_IF_ERROR(CheckFloatArray(file_, at));
    Source s;
    s.at = &at;
    s.size = at.array->NumElements();
    if (at.array->fortran_order && at.array->shape.size() > 1) {
      CACT_ASSIGN_OR_RETURN(s.owned, ArrayFloats(file_, at));
    }
    return s;
  }

  // An optional array (probe heads size themselves from theirs), or nullptr.
  const PickleArrayAt* Find(const std::string& path) const {
    auto it = by_path_.find("params/" + path);
    return it == by_path_.end() ? nullptr : it->second;
  }

  std::vector<std::string> Unused(const FlaxCheckpoint& ckpt) const {
    std::vector<std::string> out;
    for (const PickleArrayAt& p : ckpt.params)
      if (!used_.count(p.path)) out.push_back(p.path);
    return out;
  }

 private:
  std::string file_;
  std::map<std::string, const PickleArrayAt*> by_path_;
  std::set<std::string> used_;
};

// Matrix `layer` of a stacked [L, rows, cols] array, transposed into `dst` as [cols, rows].
void TransposeInto(const ParamReader::Source& s, uint64_t layer, uint32_t rows, uint32_t cols,
                   float* dst) {
  const uint64_t m = layer * rows * cols;
  // Blocked so both the reads and the writes stay within a few cache lines.
  constexpr uint32_t kBlock = 32;
  for (uint32_t r0 = 0; r0 < rows; r0 += kBlock)
    for (uint32_t c0 = 0; c0 < cols; c0 += kBlock)
      for (uint32_t r = r0; r < std::min(rows, r0 + kBlock); ++r)
        for (uint32_t c = c0; c < std::min(cols, c0 + kBlock); ++c)
          dst[uint64_t(c) * rows + r] = s[m + uint64_t(r) * cols + c];
}

class CanonicalWriter {
 public:
  explicit CanonicalWriter(Safetensors* out) : out_(out) {}

  // Elements [begin, begin + count) of `s` (a stacked array's layer slice), as they are.
  void Copy(const std::string& name, const ParamReader::Source& s, uint64_t begin, uint64_t count,
            std::vector<uint32_t> shape) {
    FloatTensor t{name, std::move(shape), std::vector<float>(count), s.dtype()};
    for (uint64_t k = 0; k < count; ++k) t.data[k] = s[begin + k];
    out_->tensors.push_back(std::move(t));
  }
  // Matrix `layer` of a stacked [L, rows, cols] array, transposed to [cols, rows].
  void Transposed(const std::string& name, const ParamReader::Source& s, uint64_t layer,
                  uint32_t rows, uint32_t cols) {
    FloatTensor t{name, {cols, rows}, std::vector<float>(uint64_t(rows) * cols), s.dtype()};
    TransposeInto(s, layer, rows, cols, t.data.data());
    out_->tensors.push_back(std::move(t));
  }

 private:
  Safetensors* out_;
};

}  // namespace

absl::StatusOr<TrainingPickleKind> ClassifyTrainingPickle(const PickleDocument& doc) {
  CACT_ASSIGN_OR_RETURN(const PickleObject* root, RootDict(doc));
  if (root->Find("params")) return TrainingPickleKind::kCheckpoint;
  if (root->Find("lora")) return TrainingPickleKind::kAdapter;
  std::vector<std::string> keys;
  for (const auto& [k, v] : root->entries)
    if (k->kind == Kind::kStr && keys.size() < 8) keys.push_back(std::string(k->text));
  return FileError(doc.name(),
                   absl::StrCat("neither a checkpoint (no 'params') nor a LoRA adapter (no "
                                "'lora'); top-level keys: ",
                                absl::StrJoin(keys, ", ")));
}

absl::StatusOr<FlaxCheckpoint> ReadFlaxCheckpoint(const PickleDocument& doc) {
  CACT_ASSIGN_OR_RETURN(const PickleObject* root, RootDict(doc));
  FlaxCheckpoint c;
  c.file = doc.name();
  const PickleObject* params = root->Find("params");
  if (!params) return FileError(c.file, "no 'params' (not a Needle checkpoint)");
  const PickleObject* config = root->Find("config");
  if (!config) return FileError(c.file, "no 'config' (needed for the geometry)");
  if (config->kind != Kind::kDict)
    return At(c.file, "config", *config, absl::StrCat("is a ", config->TypeName(), ", not a dict"));
  c.format_version = DescriptiveInt(*root, "format_version");
  c.step = DescriptiveInt(*root, "step");
  if (const PickleObject* run = root->Find("run")) {
    absl::StatusOr<nlohmann::json> j = ToJson(c.file, *run, "run", 0);
    c.run = run->kind != Kind::kDict ? ScalarText(*run) : j.ok() ? j->dump() : "<dict>";
  }
  CACT_ASSIGN_OR_RETURN(nlohmann::json cj, ToJson(c.file, *config, "config", 0));
  c.config_json = cj.dump();
  CACT_ASSIGN_OR_RETURN(c.weight_bits, WeightBitsScheme(c.file, *config));
  CACT_RETURN_IF_ERROR(CollectArrays(c.file, *params, "params", 0, &c.params));
  if (c.params.empty()) return At(c.file, "params", *params, "holds no arrays");
  return c;
}

absl::StatusOr<FlaxAdapter> ReadFlaxAdapter(const PickleDocument& doc) {
  CACT_ASSIGN_OR_RETURN(const PickleObject* root, RootDict(doc));
  FlaxAdapter ad;
  ad.file = doc.name();
  const PickleObject* lora = root->Find("lora");
  if (!lora) return FileError(ad.file, "no 'lora' (not a Needle LoRA adapter)");
  if (lora->kind != Kind::kDict)
    return At(ad.file, "lora", *lora, absl::StrCat("is a ", lora->TypeName(), ", not a dict"));
  const PickleObject* scale = root->Find("scale");
  if (!scale) return FileError(ad.file, "no 'scale' (alpha / rank)");
  std::optional<double> scale_value = Number(*scale);
  if (!scale_value || !std::isfinite(*scale_value))
    return At(ad.file, "scale", *scale,
              absl::StrCat("is a ", scale->TypeName(), ", not a finite number"));
  ad.scale = *scale_value;
  ad.rank = DescriptiveInt(*root, "rank");
  if (const PickleObject* base = root->Find("base")) ad.base = ScalarText(*base);
  // The QAT metadata: None or an int width, None or a bits map string (as finetune writes).
  if (const PickleObject* q = root->Find("qat_bits"); q && q->kind != Kind::kNone) {
    if (q->kind != Kind::kInt || q->i < 2 || q->i > 4)
      return At(ad.file, "qat_bits", *q,
                absl::StrCat("is ", q->kind == Kind::kInt ? absl::StrCat(q->i) : q->TypeName(),
                             "; expected None or a width 2, 3 or 4"));
    ad.qat_bits = q->i;
  }
  if (const PickleObject* q = root->Find("qat_bits_map"); q && q->kind != Kind::kNone) {
    if (q->kind != Kind::kStr)
      return At(ad.file, "qat_bits_map", *q,
                absl::StrCat("is a ", q->TypeName(), "; expected None or a bits map string"));
    if (absl::StatusOr<Scheme> s = ParseScheme(std::string(q->text)); !s.ok())
      return At(ad.file, "qat_bits_map", *q,
                absl::StrCat("'", std::string(q->text), "': ", std::string(s.status().message())));
    ad.qat_bits_map = std::string(q->text);
  }
  if (ad.qat_bits && ad.qat_bits_map)
    return FileError(ad.file, "sets both qat_bits and qat_bits_map (finetune writes one)");
  if (const PickleObject* q = root->Find("seed"); q && q->kind != Kind::kNone) {
    if (q->kind != Kind::kInt)
      return At(ad.file, "seed", *q, absl::StrCat("is a ", q->TypeName(), "; expected an int"));
    ad.seed = q->i;
  }
  for (const auto& [k, v] : root->entries) {
    if (k->kind != Kind::kStr) continue;
    const std::string key(k->text);
    if (key != "lora" && key != "scale" && key != "rank" && key != "base" && key != "qat_bits" &&
        key != "qat_bits_map" && key != "seed")
      ad.extra.emplace_back(key, ScalarText(*v));
  }
  for (const auto& [k, v] : lora->entries) {
    if (k->kind != Kind::kStr)
      return At(ad.file, "lora", *k, absl::StrCat("has a ", k->TypeName(), " key"));
    const std::string path(k->text);
    if (v->kind != Kind::kDict)
      return At(ad.file, "lora/" + path, *v,
                absl::StrCat("is a ", v->TypeName(), ", not a dict of A and B"));
    FlaxAdapter::Target t;
    t.path = path;
    for (PickleArrayAt* half : {&t.a, &t.b}) {
      const std::string name = half == &t.a ? "A" : "B";
      const PickleObject* m = v->Find(name);
      if (!m) return At(ad.file, "lora/" + path, *v, "has no '" + name + "'");
      half->path = absl::StrCat("lora/", path, "/", name);
      if (m->kind != Kind::kArray)
        return At(ad.file, half->path, *m, absl::StrCat("is a ", m->TypeName(), ", not an array"));
      half->array = m->array;
      half->offset = m->offset;
    }
    ad.targets.push_back(std::move(t));
  }
  if (ad.targets.empty()) return At(ad.file, "lora", *lora, "holds no targets");
  return ad;
}

absl::StatusOr<Geometry> CheckpointGeometry(const FlaxCheckpoint& ckpt) {
  CACT_ASSIGN_OR_RETURN(Geometry g,
                        GeometryFromOfficialConfig(ckpt.config_json, 0, ckpt.file + " config"));
  g.kv_window = ExporterKvWindow(g, g.kv_window);
  return g;
}

absl::StatusOr<CanonicalWeights> CheckpointToCanonical(const FlaxCheckpoint& ckpt,
                                                       const Geometry& g) {
  CanonicalWeights cw;
  ParamReader in(ckpt);
  CanonicalWriter w(&cw.weights);
  const uint64_t L = g.num_layers, d = g.d_model, A = g.attn_dim(), K = g.kv_dim(), hd = g.head_dim,
                 n = g.hada_n, m = g.mhc_lanes, T = g.num_engram_tables, S = g.engram_slots,
                 s = g.engram_sub_dim;
  using Src = ParamReader::Source;

  CACT_ASSIGN_OR_RETURN(Src emb, in.Get("embedding/embedding", {g.vocab, d}));
  w.Copy("embedding", emb, 0, emb.size, {g.vocab, uint32_t(d)});

  const std::string blk = "stack/layers/block/";
  CACT_ASSIGN_OR_RETURN(Src norm_in, in.Get(blk + "ZCRMSNorm_0/scale", {L, d}));
  struct Proj {
    const char* name;
    uint64_t in, out;
  };
  const Proj projs[] = {{"q_proj", d, A},
                        {"k_proj", d, K},
                        {"v_proj", d, K},
                        {"gate_proj", d, A},
                        {"out_proj", A, d}};
  std::map<std::string, Src> kernels;
  for (const Proj& p : projs) {
    CACT_ASSIGN_OR_RETURN(kernels[p.name],
                          in.Get(blk + "self_attn/" + p.name + "/kernel", {L, p.in, p.out}));
  }
  CACT_ASSIGN_OR_RETURN(Src q_norm, in.Get(blk + "self_attn/q_norm/scale", {L, hd}));
  CACT_ASSIGN_OR_RETURN(Src k_norm, in.Get(blk + "self_attn/k_norm/scale", {L, hd}));
  CACT_ASSIGN_OR_RETURN(Src post, in.Get(blk + "post_attn_norm/scale", {L, d}));
  CACT_ASSIGN_OR_RETURN(Src gate, in.Get(blk + "attn_gate", {L}));
  CACT_ASSIGN_OR_RETURN(Src pre_hada, in.Get(blk + "pre_hada_norm/scale", {L, d}));
  Src dn[3];
  for (int k = 0; k < 3; ++k) {
    CACT_ASSIGN_OR_RETURN(dn[k], in.Get(absl::StrCat(blk, "hadamard_mlp/d", k + 1), {L, n}));
  }
  auto proj = [&](uint64_t l, const Proj& p) {
    w.Transposed(absl::StrFormat("layer%02d.%s", l, p.name), kernels[p.name], l, uint32_t(p.in),
                 uint32_t(p.out));
  };
  for (uint64_t l = 0; l < L; ++l) {
    const std::string pre = absl::StrFormat("layer%02d.", l);
    w.Copy(pre + "norm_in", norm_in, l * d, d, {uint32_t(d)});
    for (int k = 0; k < 3; ++k) proj(l, projs[k]);
    w.Copy(pre + "q_norm", q_norm, l * hd, hd, {uint32_t(hd)});
    w.Copy(pre + "k_norm", k_norm, l * hd, hd, {uint32_t(hd)});
    proj(l, projs[3]);
    proj(l, projs[4]);
    w.Copy(pre + "post_norm", post, l * d, d, {uint32_t(d)});
    w.Copy(pre + "attn_gate", gate, l, 1, {1});
    w.Copy(pre + "pre_hada", pre_hada, l * d, d, {uint32_t(d)});
    for (int k = 0; k < 3; ++k)
      w.Copy(absl::StrCat(pre, "d", k + 1), dn[k], l * n, n, {uint32_t(n)});
  }

  for (const char* name : {"mhc_a_pre", "mhc_a_post", "mhc_a_res"}) {
    CACT_ASSIGN_OR_RETURN(Src a, in.Get(std::string("stack/") + name, {L}));
    w.Copy(name, a, 0, L, {uint32_t(L)});
  }
  for (const char* name : {"mhc_b_pre", "mhc_b_post"}) {
    CACT_ASSIGN_OR_RETURN(Src b, in.Get(std::string("stack/") + name, {L, m}));
    w.Copy(name, b, 0, L * m, {uint32_t(L), uint32_t(m)});
  }
  CACT_ASSIGN_OR_RETURN(Src b_res, in.Get("stack/mhc_b_res", {L, m, m}));
  w.Copy("mhc_b_res", b_res, 0, L * m * m, {uint32_t(L), uint32_t(m), uint32_t(m)});
  // phi [L, m*d, k] -> [L*k, m*d]: each layer's [m*d, k] transposed, the layers stacked.
  for (auto [name, k] :
       {std::pair{"mhc_phi_pre", m}, {"mhc_phi_post", m}, {"mhc_phi_res", m * m}}) {
    CACT_ASSIGN_OR_RETURN(Src phi, in.Get(std::string("stack/") + name, {L, m * d, k}));
    const uint64_t width = m * d;
    FloatTensor t{
        name, {uint32_t(L * k), uint32_t(width)}, std::vector<float>(L * k * width), phi.dtype()};
    for (uint64_t l = 0; l < L; ++l)
      TransposeInto(phi, l, uint32_t(width), uint32_t(k), t.data.data() + l * k * width);
    cw.weights.tensors.push_back(std::move(t));
  }

  for (uint32_t site = 0; site < g.num_engram_sites; ++site) {
    const std::string eg = absl::StrCat("engrams_", site, "/");
    const std::string pre = absl::StrCat("engram", site, ".");
    CACT_ASSIGN_OR_RETURN(Src tables, in.Get(eg + "embedding", {T, S, s}));
    w.Copy(pre + "tables", tables, 0, T * S * s, {uint32_t(T * S), uint32_t(s)});
    for (const char* p : {"key_proj", "value_proj"}) {
      CACT_ASSIGN_OR_RETURN(Src k, in.Get(eg + p + "/kernel", {T * s, d}));
      w.Transposed(pre + p, k, 0, uint32_t(T * s), uint32_t(d));
    }
    CACT_ASSIGN_OR_RETURN(Src taps, in.Get(eg + "taps", {g.engram_conv_taps, d}));
    w.Copy(pre + "taps", taps, 0, taps.size, {g.engram_conv_taps, uint32_t(d)});
  }
  CACT_ASSIGN_OR_RETURN(Src final_norm, in.Get("stack/final_norm/scale", {d}));
  w.Copy("final_norm", final_norm, 0, d, {uint32_t(d)});

  // Probe heads, in the exporter's order and codes; each sizes itself from its probes and
  // projection kernel, and a head without a bias gets zeros.
  const std::pair<const char*, float> kHeads[] = {{"contrastive_head", 1.0f},
                                                  {"confidence_head", 2.0f}};
  FloatTensor manifest{"heads.manifest", {0}, {}, emb.dtype()};  // derived: no dtype of its own
  Safetensors heads;
  CanonicalWriter hw(&heads);
  for (const auto& [key, code] : kHeads) {
    const std::string h = key;
    const PickleArrayAt* probes_at = in.Find(h + "/probes");
    const PickleArrayAt* kernel_at = in.Find(h + "/proj/kernel");
    if (!probes_at && !kernel_at) continue;
    if (!probes_at || probes_at->array->shape.size() != 2)
      return FileError(ckpt.file, "params/" + h + "/probes must be a [P, d_model] array");
    if (!kernel_at || kernel_at->array->shape.size() != 2)
      return FileError(ckpt.file, "params/" + h + "/proj/kernel must be a [P*d_model, out] array");
    const uint64_t P = probes_at->array->shape[0], out = kernel_at->array->shape[1];
    CACT_ASSIGN_OR_RETURN(Src probes, in.Get(h + "/probes", {P, d}));
    CACT_ASSIGN_OR_RETURN(Src kernel, in.Get(h + "/proj/kernel", {P * d, out}));
    manifest.data.push_back(code);
    hw.Copy(h + ".probes", probes, 0, P * d, {uint32_t(P), uint32_t(d)});
    hw.Transposed(h + ".proj", kernel, 0, uint32_t(P * d), uint32_t(out));
    if (in.Find(h + "/proj/bias")) {
      CACT_ASSIGN_OR_RETURN(Src bias, in.Get(h + "/proj/bias", {out}));
      hw.Copy(h + ".bias", bias, 0, out, {uint32_t(out)});
    } else {
      heads.tensors.push_back(
          {h + ".bias", {uint32_t(out)}, std::vector<float>(out, 0.0f), kernel.dtype()});
    }
  }
  if (!manifest.data.empty()) {
    manifest.shape = {uint32_t(manifest.data.size())};
    cw.weights.tensors.push_back(std::move(manifest));
    for (FloatTensor& t : heads.tensors) cw.weights.tensors.push_back(std::move(t));
  }

  std::set<std::string> dtypes;
  for (const FloatTensor& t : cw.weights.tensors) dtypes.insert(t.stored_dtype);
  cw.dtype = dtypes.size() > 1 ? "mixed" : *dtypes.begin() == "F16" ? "float16" : "float32";
  cw.unused = in.Unused(ckpt);
  cw.weights.metadata["config"] = ckpt.config_json;
  cw.weights.metadata["kv_window_header"] = absl::StrCat(g.kv_window);
  cw.weights.metadata["group"] = "128";
  cw.weights.metadata["bits_map"] = ckpt.weight_bits.empty() ? "default=4" : ckpt.weight_bits;
  cw.weights.metadata["bits_map_source"] =
      ckpt.weight_bits.empty() ? "needle build's default (the config names no weight_bits)"
                               : "checkpoint config weight_bits";
  cw.weights.metadata["config_source"] =
      "checkpoint config (header kv_window: the exporter's budget)";
  cw.weights.metadata["source"] = "Needle checkpoint " + ckpt.file;
  return cw;
}

absl::StatusOr<Safetensors> AdapterAsStacked(const FlaxAdapter& ad) {
  Safetensors st;
  for (const FlaxAdapter::Target& t : ad.targets) {
    for (const PickleArrayAt* at : {&t.a, &t.b}) {
      CACT_ASSIGN_OR_RETURN(std::vector<float> v, ArrayFloats(ad.file, *at));
      std::vector<uint32_t> shape;
      for (uint64_t x : at->array->shape) {
        if (x > UINT32_MAX)
          return FormatError(ad.file, at->path, at->offset, "has a dimension above 2^32");
        shape.push_back(uint32_t(x));
      }
      st.tensors.push_back({t.path + (at == &t.a ? "/A" : "/B"), shape, std::move(v), "F32"});
    }
  }
  st.metadata["scale"] = absl::StrFormat("%.17g", ad.scale);
  if (ad.qat_bits) st.metadata["qat_bits"] = absl::StrCat(*ad.qat_bits);
  if (ad.qat_bits_map) st.metadata["qat_bits_map"] = *ad.qat_bits_map;
  return st;
}

absl::Status MergeLoraIntoWeights(const LoraAdapter& adapter, Safetensors* weights) {
  std::map<std::string, FloatTensor*> by_name;
  for (FloatTensor& t : weights->tensors) by_name[t.name] = &t;
  for (const LoraPair& p : adapter.pairs) {
    const std::string name = absl::StrFormat("layer%02d.%s", p.layer, p.proj);
    auto it = by_name.find(name);
    if (it == by_name.end() || it->second->shape != std::vector<uint32_t>{p.out, p.in})
      return absl::InvalidArgumentError(absl::StrFormat(
          "the adapter's %s update [%d, %d] has no matching weight", name, p.out, p.in));
    FloatTensor& t = *it->second;
    const std::vector<float> dw = LoraDelta(p, adapter.scale);
    if (t.stored_dtype == "F16") {
      for (size_t k = 0; k < dw.size(); ++k) t.data[k] = AsHalf(t.data[k] + AsHalf(dw[k]));
    } else {
      for (size_t k = 0; k < dw.size(); ++k) t.data[k] += dw[k];
    }
  }
  return absl::OkStatus();
}

namespace {

// Every target is one of the five attention projection kernels, with [L, in, r] and
// [L, r, out] halves of one rank that fit `g`.
absl::Status CheckAdapterFits(const FlaxAdapter& ad, const Geometry& g) {
  const uint64_t L = g.num_layers, d = g.d_model, A = g.attn_dim(), K = g.kv_dim();
  const std::map<std::string, std::pair<uint64_t, uint64_t>> kInOut = {{"q_proj", {d, A}},
                                                                       {"k_proj", {d, K}},
                                                                       {"v_proj", {d, K}},
                                                                       {"gate_proj", {d, A}},
                                                                       {"out_proj", {A, d}}};
  const std::string kPrefix = "stack/layers/block/self_attn/", kSuffix = "/kernel";
  for (const FlaxAdapter::Target& t : ad.targets) {
    std::string proj;
    if (t.path.size() > kPrefix.size() + kSuffix.size() && t.path.rfind(kPrefix, 0) == 0 &&
        t.path.compare(t.path.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0)
      proj = t.path.substr(kPrefix.size(), t.path.size() - kPrefix.size() - kSuffix.size());
    auto it = kInOut.find(proj);
    if (it == kInOut.end())
      return FormatError(ad.file, "lora/" + t.path, t.a.offset,
                         "is not a q/k/v/gate/out_proj kernel under " + kPrefix);
    const auto [in, out] = it->second;
    const std::vector<uint64_t>& a = t.a.array->shape;
    const std::vector<uint64_t>& b = t.b.array->shape;
    if (a.size() != 3 || a[0] != L || a[1] != in || a[2] == 0)
      return FormatError(ad.file, t.a.path, t.a.offset,
                         absl::StrFormat("has shape %s; this model needs [%d, %d, rank] (an "
                                         "adapter for another model?)",
                                         ShapeText(a), L, in));
    if (b != std::vector<uint64_t>{L, a[2], out})
      return FormatError(ad.file, t.b.path, t.b.offset,
                         absl::StrFormat("has shape %s; this model and A need [%d, %d, %d]",
                                         ShapeText(b), L, a[2], out));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Safetensors> ReadAdapterFile(const std::string& path, const Geometry& g) {
  CACT_ASSIGN_OR_RETURN(FileBytes bytes, FileBytes::Open(path));
  if (!LooksLikePickle(bytes.span())) return ParseSafetensors(bytes.span(), path);
  CACT_ASSIGN_OR_RETURN(PickleDocument doc, PickleDocument::Parse(std::move(bytes)));
  CACT_ASSIGN_OR_RETURN(TrainingPickleKind kind, ClassifyTrainingPickle(doc));
  if (kind != TrainingPickleKind::kAdapter)
    return FileError(path, "is a checkpoint, not a LoRA adapter");
  CACT_ASSIGN_OR_RETURN(FlaxAdapter ad, ReadFlaxAdapter(doc));
  CACT_RETURN_IF_ERROR(CheckAdapterFits(ad, g));
  return AdapterAsStacked(ad);
}

absl::StatusOr<CheckpointBuild> LoadCheckpointForBuild(const std::string& checkpoint_path,
                                                       const std::string& adapter_path,
                                                       std::optional<double> scale_override) {
  CheckpointBuild b;
  CACT_ASSIGN_OR_RETURN(PickleDocument doc, PickleDocument::Open(checkpoint_path));
  CACT_ASSIGN_OR_RETURN(TrainingPickleKind kind, ClassifyTrainingPickle(doc));
  if (kind != TrainingPickleKind::kCheckpoint)
    return FileError(checkpoint_path, "is a LoRA adapter, not a checkpoint (give it to --lora)");
  CACT_ASSIGN_OR_RETURN(FlaxCheckpoint ckpt, ReadFlaxCheckpoint(doc));
  CACT_ASSIGN_OR_RETURN(b.geometry, CheckpointGeometry(ckpt));
  CACT_ASSIGN_OR_RETURN(b.canonical, CheckpointToCanonical(ckpt, b.geometry));
  const std::string bits_map = b.canonical.weights.metadata["bits_map"];
  absl::StatusOr<Scheme> scheme = ParseScheme(bits_map);
  if (!scheme.ok())
    return FileError(checkpoint_path, "config weight_bits '" + bits_map +
                                          "': " + std::string(scheme.status().message()));
  b.scheme = *scheme;
  b.scheme_source = b.canonical.weights.metadata["bits_map_source"];
  if (!b.canonical.unused.empty())
    b.notes.push_back(absl::StrFormat("%d checkpoint arrays are not part of a .cact (first: %s)",
                                      b.canonical.unused.size(), b.canonical.unused.front()));
  if (!adapter_path.empty()) {
    CACT_ASSIGN_OR_RETURN(Safetensors stacked, ReadAdapterFile(adapter_path, b.geometry));
    CACT_ASSIGN_OR_RETURN(LoraAdapter ad,
                          ParseLoraAdapter(stacked, adapter_path, "", scale_override, b.geometry));
    CACT_RETURN_IF_ERROR(MergeLoraIntoWeights(ad, &b.canonical.weights));
    b.notes.push_back(absl::StrFormat(
        "merged %s: %d projection updates (rank %d, scale %g from %s) in the checkpoint's %s",
        adapter_path, ad.pairs.size(), ad.pairs.empty() ? 0 : ad.pairs.front().rank, ad.scale,
        ad.scale_source, b.canonical.dtype));
    b.canonical.weights.metadata["lora"] = adapter_path;
    // `needle build` deploys what the adapter trained through: its bits map, else its
    // uniform width; the checkpoint's weight_bits then plays no part.
    b.adapter_path = adapter_path;
    CACT_ASSIGN_OR_RETURN(b.adapter_qat, AdapterQatOf(stacked, adapter_path));
    if (b.adapter_qat.recorded()) {
      b.scheme = b.adapter_qat.scheme();
      b.scheme_source = b.adapter_qat.source();
      b.canonical.weights.metadata["bits_map"] = b.scheme.ToString();
      b.canonical.weights.metadata["bits_map_source"] = b.scheme_source;
      b.notes.push_back("scheme " + b.scheme.ToString() + " from " + b.scheme_source);
    }
  }
  // Nothing non-finite leaves here (convert writes these values as they are).
  for (const FloatTensor& t : b.canonical.weights.tensors)
    CACT_RETURN_IF_ERROR(CheckTensorFinite(t, adapter_path.empty() ? checkpoint_path
                                                                   : checkpoint_path + " + " +
                                                                         adapter_path));
  return b;
}

}  // namespace cact
