// The pickle writer against the restricted unpickler, both ways:
//  - the input is a recipe for a value tree (kinds, arbitrary-byte strings, ints, float bits
//    with NaNs, arrays of every dtype and bounded shape, long lists and dicts that cross the
//    1,000-item batches, nesting past the depth bound, wrong array byte counts, duplicate
//    keys): the writer refuses exactly what an independent check expects it to, and what it
//    writes reads back as the same values;
//  - the input is a pickle: whatever the reader accepts and a value tree can hold (no sets,
//    str keys, C order, UTF-8) is written and read back as the same values.
#include <cstdint>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "formats/pickle.h"
#include "formats/pickle_writer.h"
#include "fuzz_common.h"

using namespace cact;

namespace {

using V = PickleValue;

// UTF-8 as Python's str accepts it, checked here independently of the writer: no overlong
// forms, no surrogates, nothing above U+10FFFF.
bool StrictUtf8(const std::string& s) {
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = uint8_t(s[i]);
    const size_t len = c < 0x80           ? 1
                       : (c >> 5) == 0x6  ? 2
                       : (c >> 4) == 0xE  ? 3
                       : (c >> 3) == 0x1E ? 4
                                          : 0;
    if (len == 0 || len > s.size() - i) return false;
    uint32_t cp = len == 1 ? c : c & (0x7Fu >> len);
    for (size_t k = 1; k < len; ++k) {
      const uint8_t t = uint8_t(s[i + k]);
      if ((t & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (t & 0x3F);
    }
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

// The recipe: bytes read in order, zeros once they run out (so an exhausted recipe ends in
// Nones and every tree is finite).
class Recipe {
 public:
  Recipe(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  uint8_t Byte() { return n_ ? (--n_, *p_++) : 0; }
  // Bounds the tree (a few bytes can ask for 1,000-item containers inside each other).
  bool Node() { return nodes_left_-- > 0; }
  uint64_t Le(int bytes) {
    uint64_t v = 0;
    for (int k = 0; k < bytes; ++k) v |= uint64_t(Byte()) << (8 * k);
    return v;
  }
  // Up to 1,275 bytes (past SHORT_BINUNICODE's 255), the tail padded when the input ends.
  std::string Text() {
    size_t len = Byte();
    if (len == 255) len += size_t(Byte()) * 4;
    std::string s;
    for (size_t k = 0; k < len; ++k) s += char(n_ ? Byte() : 'a' + k % 26);
    return s;
  }

 private:
  const uint8_t* p_;
  size_t n_;
  int64_t nodes_left_ = 20000;
};

constexpr int kMaxBuildDepth = kPickleMaxWalkDepth + 3;

// A value from the recipe: the low 4 bits of a byte pick the kind, the high ones vary it.
// `ok` is cleared when the writer must refuse the value.
V Build(Recipe& r, int depth, bool* ok) {
  const uint8_t op = r.Byte();
  const int kind = depth >= kMaxBuildDepth || !r.Node() ? 0 : (op & 0x0F) % 10;
  if (depth > kPickleMaxWalkDepth) *ok = false;  // whatever sits this deep is refused
  switch (kind) {
    case 0:
      return V::None();
    case 1:
      return V::Bool(op & 0x10);
    case 2: {
      const int width = 1 << ((op >> 4) & 3);  // 1, 2, 4 or 8 bytes, sign-extended
      const int shift = 64 - 8 * width;
      return V::Int(int64_t(r.Le(width) << shift) >> shift);
    }
    case 3: {
      const uint64_t bits = r.Le(8);
      double f;
      std::memcpy(&f, &bits, 8);
      return V::Float(f);
    }
    case 4: {
      std::string s = r.Text();
      if (!StrictUtf8(s)) *ok = false;
      return V::Str(std::move(s));
    }
    case 5:
      return V::Bytes(r.Text());
    case 6:
    case 7: {
      size_t n = r.Byte() % 6;
      if (op & 0x80) n = 995 + r.Byte() % 16;  // around the 1,000-item batch
      std::vector<V> items;
      for (size_t k = 0; k < n; ++k) items.push_back(Build(r, depth + 1, ok));
      return kind == 6 ? V::List(std::move(items)) : V::Tuple(std::move(items));
    }
    case 8: {
      size_t n = r.Byte() % 6;
      if (op & 0x80) n = 995 + r.Byte() % 16;
      V d = V::Dict();
      std::set<std::string> keys;
      for (size_t k = 0; k < n; ++k) {
        std::string key = (op & 0x80) ? absl::StrCat("k", k) : r.Text();
        if (!StrictUtf8(key) || !keys.insert(key).second) *ok = false;
        V value = Build(r, depth + 1, ok);
        d.entries.emplace_back(std::move(key), std::move(value));
      }
      return d;
    }
    default: {  // an array of 0-4 dims of 0-5 each
      const PickleDtype t = PickleDtype(r.Byte() % 12);
      std::vector<uint64_t> shape(r.Byte() % 5);
      uint64_t count = 1;
      for (uint64_t& d : shape) count *= (d = r.Byte() % 6);
      std::vector<uint8_t> data(count * PickleDtypeSize(t));
      for (uint8_t& b : data) b = r.Byte();
      if (op & 0x80) {  // one byte too many or too few
        if (data.empty() || (op & 0x40))
          data.push_back(0);
        else
          data.pop_back();
        *ok = false;
      }
      return V::Array(t, std::move(shape), std::move(data));
    }
  }
}

// One canonical text of a value: floats as their bits, text and arrays as hex.
std::string Describe(const V& v) {
  switch (v.kind) {
    case V::Kind::kNone:
      return "None";
    case V::Kind::kBool:
      return v.b ? "True" : "False";
    case V::Kind::kInt:
      return absl::StrCat("i", v.i);
    case V::Kind::kFloat: {
      uint64_t bits;
      std::memcpy(&bits, &v.f, 8);
      return absl::StrFormat("f%016x", bits);
    }
    case V::Kind::kStr:
      return "s" + absl::BytesToHexString(v.text);
    case V::Kind::kBytes:
      return "b" + absl::BytesToHexString(v.text);
    case V::Kind::kList:
    case V::Kind::kTuple: {
      std::vector<std::string> items;
      for (const V& item : v.items) items.push_back(Describe(item));
      const bool list = v.kind == V::Kind::kList;
      return absl::StrCat(list ? "[" : "(", absl::StrJoin(items, ","), list ? "]" : ")");
    }
    case V::Kind::kDict: {
      std::vector<std::string> items;
      for (const auto& [k, item] : v.entries)
        items.push_back(absl::BytesToHexString(k) + ":" + Describe(item));
      return "{" + absl::StrJoin(items, ",") + "}";
    }
    case V::Kind::kArray:
      return absl::StrCat("a", PickleDtypeName(v.dtype), ":", absl::StrJoin(v.shape, "x"), ":",
                          absl::BytesToHexString(std::string(v.data.begin(), v.data.end())));
  }
  return "?";
}

// A parsed object as a value tree, when one can hold it; `budget` bounds the nodes and bytes
// (memo sharing can make a small pickle a huge tree).
std::optional<V> ToValue(const PickleObject& o, int depth, int64_t* budget) {
  using K = PickleObject::Kind;
  *budget -= 1 + int64_t(o.text.size()) + (o.array ? int64_t(o.array->data.size()) : 0);
  if (depth > kPickleMaxWalkDepth || *budget < 0) return std::nullopt;
  switch (o.kind) {
    case K::kNone:
      return V::None();
    case K::kBool:
      return V::Bool(o.b);
    case K::kInt:
      return V::Int(o.i);
    case K::kFloat:
      return V::Float(o.f);
    case K::kStr:
      if (!StrictUtf8(std::string(o.text))) return std::nullopt;  // e.g. surrogates
      return V::Str(std::string(o.text));
    case K::kBytes:
      return V::Bytes(std::string(o.text));
    case K::kList:
    case K::kTuple: {
      std::vector<V> items;
      for (const PickleObject* item : o.items) {
        std::optional<V> v = ToValue(*item, depth + 1, budget);
        if (!v) return std::nullopt;
        items.push_back(std::move(*v));
      }
      return o.kind == K::kList ? V::List(std::move(items)) : V::Tuple(std::move(items));
    }
    case K::kDict: {
      V d = V::Dict();
      for (const auto& [k, item] : o.entries) {
        if (k->kind != K::kStr || !StrictUtf8(std::string(k->text))) return std::nullopt;
        std::optional<V> v = ToValue(*item, depth + 1, budget);
        if (!v) return std::nullopt;
        d.entries.emplace_back(std::string(k->text), std::move(*v));  // the reader made keys unique
      }
      return d;
    }
    case K::kArray: {
      const PickleArray& a = *o.array;
      if (a.fortran_order && a.shape.size() > 1) return std::nullopt;
      return V::Array(a.dtype, a.shape, std::vector<uint8_t>(a.data.begin(), a.data.end()));
    }
    case K::kSet:
      return std::nullopt;
  }
  return std::nullopt;
}

absl::StatusOr<PickleDocument> Parse(const std::string& bytes) {
  return PickleDocument::Parse(
      FileBytes::FromBuffer("w.pkl", std::vector<uint8_t>(bytes.begin(), bytes.end())));
}

// Writes `v`, reads it back, and aborts unless the values are the same.
void CheckRoundTrip(const V& v, const std::string& want) {
  absl::StatusOr<std::string> bytes = SerializePickle(v);
  CACT_FUZZ_CHECK(bytes.ok(), "the writer accepts a valid value tree");
  absl::StatusOr<PickleDocument> doc = Parse(*bytes);
  if (!doc.ok()) std::fprintf(stderr, "%s\n", std::string(doc.status().message()).c_str());
  CACT_FUZZ_CHECK(doc.ok(), "the reader accepts what the writer wrote");
  CACT_FUZZ_CHECK(doc->protocol() == 4, "protocol 4");
  int64_t budget = int64_t(1) << 40;
  std::optional<V> back = ToValue(doc->root(), 0, &budget);
  CACT_FUZZ_CHECK(back.has_value(), "what was written converts back");
  CACT_FUZZ_CHECK(Describe(*back) == want, "the values read back are the values written");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The input as a recipe.
  Recipe recipe(data, size);
  bool ok = true;
  const V value = Build(recipe, 0, &ok);
  absl::StatusOr<std::string> bytes = SerializePickle(value);
  if (bytes.ok() != ok && !bytes.ok())
    std::fprintf(stderr, "%s\n", std::string(bytes.status().message()).c_str());
  CACT_FUZZ_CHECK(bytes.ok() == ok, "the writer refuses exactly the invalid trees");
  if (!bytes.ok()) {
    CACT_FUZZ_CHECK(std::string(bytes.status().message()).rfind("pickle value ", 0) == 0,
                    "errors name the value");
  } else {
    CheckRoundTrip(value, Describe(value));
  }

  // The input as a pickle.
  absl::StatusOr<PickleDocument> doc = Parse(std::string(data, data + size));
  if (!doc.ok()) return 0;
  int64_t budget = 1 << 20;
  std::optional<V> parsed = ToValue(doc->root(), 0, &budget);
  if (parsed) CheckRoundTrip(*parsed, Describe(*parsed));
  return 0;
}
