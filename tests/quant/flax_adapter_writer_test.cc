// The official LoRA adapter pickle written by cact: read back by ReadFlaxAdapter /
// AdapterAsStacked / ReadAdapterFile bit for bit (with and without the QAT metadata), seen by
// Python's pickle.load as the trainer's dict (keys in order, float32 arrays of the official
// shapes, same values), equal to the numpy-written official adapter it is rebuilt from, and
// refusing what would not read back.
#include "quant/import/flax_adapter_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "formats/pickle.h"
#include "lib/sha256.h"
#include "quant/import/flax_checkpoint.h"
#include "quant/import/lora.h"
#include "support/test_support.h"
#include "support/training_pickles.h"

namespace cact {
namespace {

using testing::TrainingPickles;

constexpr char kPrefix[] = "stack/layers/block/self_attn/";

// The tiny geometry: d 128, attention 128, kv 64, 4 layers.
Geometry Tiny() {
  Geometry g;
  g.vocab = 512, g.d_model = 128, g.num_heads = 4, g.num_kv_heads = 2, g.head_dim = 32;
  g.num_layers = 4, g.hada_n = 128;
  return g;
}

// All five targets of `g`, values from a fixed pattern (no two neighbours equal).
FlaxAdapterToWrite MakeAdapter(const Geometry& g, int64_t rank) {
  FlaxAdapterToWrite ad;
  const uint32_t d = g.d_model, A = g.attn_dim(), K = g.kv_dim();
  const std::pair<const char*, std::pair<uint32_t, uint32_t>> kInOut[] = {{"q_proj", {d, A}},
                                                                          {"k_proj", {d, K}},
                                                                          {"v_proj", {d, K}},
                                                                          {"gate_proj", {d, A}},
                                                                          {"out_proj", {A, d}}};
  uint32_t seed = 1;
  auto next = [&] {
    seed = seed * 1664525u + 1013904223u;
    return float(int32_t(seed >> 8) - (1 << 23)) * 1e-8f;
  };
  for (const auto& [proj, io] : kInOut) {
    FlaxAdapterToWrite::Target t;
    t.path = absl::StrCat(kPrefix, proj, "/kernel");
    t.layers = g.num_layers, t.in = io.first, t.out = io.second;
    t.a.resize(uint64_t(t.layers) * t.in * rank);
    t.b.resize(uint64_t(t.layers) * rank * t.out);
    for (float& v : t.a) v = next();
    for (float& v : t.b) v = next();
    ad.targets.push_back(std::move(t));
  }
  ad.scale = 16.0 / double(rank);
  ad.base = "checkpoints/needle2.pkl";
  ad.rank = rank;
  ad.seed = 7;
  return ad;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
}

std::string Sha(const std::vector<float>& v) {
  return Sha256Hex(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), 4 * v.size()));
}

std::string Bits(double f) {
  uint64_t u;
  std::memcpy(&u, &f, 8);
  return absl::StrFormat("%016x", u);
}

// What ReadFlaxAdapter + AdapterAsStacked give back must be `ad`, exactly.
void ExpectReadsBack(const std::string& path, const FlaxAdapterToWrite& ad) {
  auto doc = PickleDocument::Open(path);
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ(doc->protocol(), 4);
  auto kind = ClassifyTrainingPickle(*doc);
  ASSERT_TRUE(kind.ok()) << kind.status();
  EXPECT_EQ(*kind, TrainingPickleKind::kAdapter);
  auto read = ReadFlaxAdapter(*doc);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(Bits(read->scale), Bits(ad.scale));
  EXPECT_EQ(read->rank, ad.rank);
  EXPECT_EQ(read->base, ad.base);
  EXPECT_EQ(read->qat_bits, ad.qat_bits);
  EXPECT_EQ(read->qat_bits_map, ad.qat_bits_map);
  EXPECT_EQ(read->seed, ad.seed);
  EXPECT_TRUE(read->extra.empty());
  ASSERT_EQ(read->targets.size(), ad.targets.size());
  auto stacked = AdapterAsStacked(*read);
  ASSERT_TRUE(stacked.ok()) << stacked.status();
  ASSERT_EQ(stacked->tensors.size(), 2 * ad.targets.size());
  const uint32_t r = uint32_t(ad.rank);
  for (size_t k = 0; k < ad.targets.size(); ++k) {
    const FlaxAdapterToWrite::Target& t = ad.targets[k];
    EXPECT_EQ(read->targets[k].path, t.path);
    const FloatTensor& a = stacked->tensors[2 * k];
    const FloatTensor& b = stacked->tensors[2 * k + 1];
    EXPECT_EQ(a.name, t.path + "/A");
    EXPECT_EQ(b.name, t.path + "/B");
    EXPECT_EQ(a.shape, (std::vector<uint32_t>{t.layers, t.in, r}));
    EXPECT_EQ(b.shape, (std::vector<uint32_t>{t.layers, r, t.out}));
    EXPECT_TRUE(SameBits(a.data, t.a)) << t.path << "/A";
    EXPECT_TRUE(SameBits(b.data, t.b)) << t.path << "/B";
  }
  EXPECT_EQ(stacked->metadata.at("scale"), absl::StrFormat("%.17g", ad.scale));
}

TEST(FlaxAdapterWriterTest, ReadsBackExactlyWithEveryQatCase) {
  const Geometry g = Tiny();
  testing::TempDir dir;
  struct Case {
    std::optional<int64_t> bits;
    std::optional<std::string> map;
  };
  for (const Case& c : {Case{}, Case{2, {}}, Case{4, {}}, Case{{}, "embedding=3,default=4"}}) {
    SCOPED_TRACE(c.bits ? absl::StrCat("qat_bits ", *c.bits) : c.map ? *c.map : "no QAT");
    FlaxAdapterToWrite ad = MakeAdapter(g, 2);
    ad.qat_bits = c.bits, ad.qat_bits_map = c.map;
    const std::string path = dir / "needle_lora.pkl";
    ASSERT_TRUE(WriteFlaxAdapter(path, ad).ok());
    ExpectReadsBack(path, ad);
    // What `cact-quant build --checkpoint ... --lora` reads: checked against the geometry,
    // then split per layer and projection.
    auto stacked = ReadAdapterFile(path, g);
    ASSERT_TRUE(stacked.ok()) << stacked.status();
    EXPECT_EQ(stacked->metadata.count("qat_bits"), c.bits ? 1u : 0u);
    EXPECT_EQ(stacked->metadata.count("qat_bits_map"), c.map ? 1u : 0u);
    auto lora = ParseLoraAdapter(*stacked, path, "", std::nullopt, g);
    ASSERT_TRUE(lora.ok()) << lora.status();
    EXPECT_EQ(lora->pairs.size(), 5u * g.num_layers);
    EXPECT_EQ(lora->scale, ad.scale);
  }
}

// Python's side: argv[1] is an adapter. Prints its keys, each target's arrays (dtype, shape,
// contiguity, SHA-256 of the bytes) and each scalar's type and value (floats as their bits).
constexpr char kAdapterPy[] = R"PY(
import hashlib, pickle, struct, sys
import numpy as np
d = pickle.load(open(sys.argv[1], "rb"))
print("type", type(d).__name__)
print("keys", ",".join(d.keys()))
print("lora", type(d["lora"]).__name__, len(d["lora"]))
for path, ab in d["lora"].items():
    parts = [path, ",".join(ab.keys())]
    for half in ("A", "B"):
        x = ab[half]
        parts += [type(x).__name__, x.dtype.str, "x".join(map(str, x.shape)),
                  "C" if x.flags.c_contiguous else "F", hashlib.sha256(x.tobytes()).hexdigest()]
    print("target", " ".join(parts))
for key in ("scale", "base", "rank", "qat_bits", "qat_bits_map", "seed"):
    v = d[key]
    shown = "%016x" % struct.unpack("<Q", struct.pack("<d", v))[0] if type(v) is float else v
    print(key, type(v).__name__, shown)
)PY";

std::string PythonView(const std::string& pkl, const std::string& script) {
  std::ofstream(script) << kAdapterPy;
  const testing::CommandResult r = testing::Run(testing::Python() + " " + script + " " + pkl);
  EXPECT_EQ(r.exit_code, 0) << r.output;  // no python or numpy fails here
  return r.output;
}

TEST(FlaxAdapterWriterTest, PythonSeesTheOfficialDict) {
  const Geometry g = Tiny();
  testing::TempDir dir;
  for (bool qat : {false, true}) {
    FlaxAdapterToWrite ad = MakeAdapter(g, 3);
    if (qat) ad.qat_bits_map = "embedding=4,mhc=4,default=2";
    ad.base = "/data/caf\xC3\xA9/needle2.pkl";
    ad.seed = -12345678901;
    ASSERT_TRUE(WriteFlaxAdapter(dir / "a.pkl", ad).ok());
    std::string want = "type dict\nkeys lora,scale,base,rank,qat_bits,qat_bits_map,seed\n";
    absl::StrAppend(&want, "lora dict ", ad.targets.size(), "\n");
    for (const auto& t : ad.targets)
      absl::StrAppend(&want, "target ", t.path, " A,B ndarray <f4 ", t.layers, "x", t.in, "x",
                      ad.rank, " C ", Sha(t.a), " ndarray <f4 ", t.layers, "x", ad.rank, "x", t.out,
                      " C ", Sha(t.b), "\n");
    absl::StrAppend(
        &want, "scale float ", Bits(ad.scale), "\n", "base str ", ad.base, "\n", "rank int 3\n",
        "qat_bits NoneType None\n",
        qat ? "qat_bits_map str embedding=4,mhc=4,default=2\n" : "qat_bits_map NoneType None\n",
        "seed int -12345678901\n");
    EXPECT_EQ(PythonView(dir / "a.pkl", dir / "view.py"), want);
  }
  FlaxAdapterToWrite w2 = MakeAdapter(g, 1);
  w2.qat_bits = 2;
  ASSERT_TRUE(WriteFlaxAdapter(dir / "w2.pkl", w2).ok());
  EXPECT_NE(PythonView(dir / "w2.pkl", dir / "view.py")
                .find("\nqat_bits int 2\nqat_bits_map NoneType None\n"),
            std::string::npos);
}

// The numpy-written official adapter (tests/quant/write_flax_pickles.py), rebuilt from what
// our reader gives and written again: our reader and Python's see the same adapter.
TEST(FlaxAdapterWriterTest, RewritesTheNumpyWrittenAdapter) {
  for (const std::string file : {"adapter_p4.pkl", "adapter_qat_map.pkl", "adapter_qat_w2.pkl"}) {
    SCOPED_TRACE(file);
    const std::string official = TrainingPickles::File("tiny", file);
    auto doc = PickleDocument::Open(official);
    ASSERT_TRUE(doc.ok()) << doc.status();
    auto read = ReadFlaxAdapter(*doc);
    ASSERT_TRUE(read.ok()) << read.status();
    auto stacked = AdapterAsStacked(*read);
    ASSERT_TRUE(stacked.ok()) << stacked.status();
    FlaxAdapterToWrite ad;
    for (size_t k = 0; k < read->targets.size(); ++k) {
      const FloatTensor& a = stacked->tensors[2 * k];
      const FloatTensor& b = stacked->tensors[2 * k + 1];
      ASSERT_EQ(a.shape.size(), 3u);
      ASSERT_EQ(b.shape.size(), 3u);
      ad.targets.push_back(
          {read->targets[k].path, a.shape[0], a.shape[1], b.shape[2], a.data, b.data});
      ad.rank = a.shape[2];
    }
    EXPECT_EQ(read->rank, ad.rank);
    ad.scale = read->scale;
    ad.base = read->base;
    ad.qat_bits = read->qat_bits;
    ad.qat_bits_map = read->qat_bits_map;
    ASSERT_TRUE(read->seed.has_value());
    ad.seed = *read->seed;
    testing::TempDir dir;
    ASSERT_TRUE(WriteFlaxAdapter(dir / "ours.pkl", ad).ok());
    ExpectReadsBack(dir / "ours.pkl", ad);

    // Python: every key holds the same value of the same type (the fixture puts "seed"
    // before the QAT keys, so the order is compared against the trainer's, not the fixture's).
    const std::string script = R"PY(
import pickle, sys
import numpy as np
ours, theirs = (pickle.load(open(p, "rb")) for p in sys.argv[1:3])
def same(a, b):
    if type(a) is not type(b): return False
    if type(a) is dict: return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if type(a) is np.ndarray: return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    return a == b
theirs.setdefault("qat_bits", None)
theirs.setdefault("qat_bits_map", None)
print(list(ours) == ["lora", "scale", "base", "rank", "qat_bits", "qat_bits_map", "seed"],
      sorted(ours) == sorted(theirs), all(same(ours[k], theirs[k]) for k in ours))
)PY";
    std::ofstream(dir / "same.py") << script;
    const testing::CommandResult r = testing::Run(testing::Python() + " " + (dir / "same.py") +
                                                  " " + (dir / "ours.pkl") + " " + official);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output, "True True True\n");
  }
}

TEST(FlaxAdapterWriterTest, RefusesWhatWouldNotReadBack) {
  const Geometry g = Tiny();
  auto error = [](const FlaxAdapterToWrite& ad) {
    auto bytes = FlaxAdapterPickle(ad);
    return bytes.ok() ? std::string("accepted") : std::string(bytes.status().message());
  };
  const FlaxAdapterToWrite good = MakeAdapter(g, 2);
  ASSERT_EQ(error(good).substr(0, 8), "accepted");

  FlaxAdapterToWrite ad = good;
  ad.targets.clear();
  EXPECT_EQ(error(ad), "LoRA adapter: no targets");
  ad = good;
  ad.targets[1].path = "stack/layers/block/mlp/up_proj/kernel";
  EXPECT_EQ(error(ad),
            "LoRA adapter: target 'stack/layers/block/mlp/up_proj/kernel' is not a "
            "q/k/v/gate/out_proj kernel under stack/layers/block/self_attn/");
  ad = good;
  ad.targets[3].path = ad.targets[0].path;
  EXPECT_EQ(error(ad), "LoRA adapter: target 'stack/layers/block/self_attn/q_proj/kernel' twice");
  ad = good;
  ad.targets[2].a.pop_back();
  EXPECT_EQ(error(ad),
            "LoRA adapter: stack/layers/block/self_attn/v_proj/kernel/A has 1023 values; its "
            "shape [4, 128, 2] needs 1024");
  ad = good;
  ad.targets[4].b[17] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NE(error(ad).find("out_proj/kernel/B value 17 is nan"), std::string::npos) << error(ad);
  ad = good;
  ad.targets[1].layers = 3;
  EXPECT_NE(error(ad).find("has 3 layers"), std::string::npos) << error(ad);
  ad = good;
  ad.targets[0].out = 0;
  EXPECT_NE(error(ad).find("has a zero dimension"), std::string::npos) << error(ad);
  ad = good;
  ad.rank = 0;
  EXPECT_EQ(error(ad), "LoRA adapter: rank 0 is not in 1..2^32-1");
  ad = good;
  ad.scale = std::numeric_limits<double>::infinity();
  EXPECT_EQ(error(ad), "LoRA adapter: scale inf is not finite");
  ad = good;
  ad.qat_bits = 8;
  EXPECT_EQ(error(ad), "LoRA adapter: qat_bits 8 is not a width 2, 3 or 4");
  ad = good;
  ad.qat_bits_map = "default=9";
  EXPECT_NE(error(ad).find("LoRA adapter: qat_bits_map 'default=9': "), std::string::npos)
      << error(ad);
  ad = good;
  ad.qat_bits = 4, ad.qat_bits_map = "default=4";
  EXPECT_EQ(error(ad), "LoRA adapter: sets both qat_bits and qat_bits_map (finetune records one)");
  ad = good;
  ad.base = "bad\xff";
  EXPECT_EQ(error(ad), "LoRA adapter: pickle value base: the str is not UTF-8 at byte 3");

  // A refused adapter leaves no file; the error names the path.
  testing::TempDir dir;
  const absl::Status st = WriteFlaxAdapter(dir / "x.pkl", ad);
  EXPECT_EQ(std::string(st.message()),
            dir / "x.pkl" + ": LoRA adapter: pickle value base: the str is not UTF-8 at byte 3");
  EXPECT_TRUE(testing::Listing(dir.path()).empty());
}

}  // namespace
}  // namespace cact
