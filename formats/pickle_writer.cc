#include "formats/pickle_writer.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "formats/le_bytes.h"
#include "lib/atomic_file.h"
#include "lib/status.h"
#include "lib/utf8.h"

namespace cact {

using ValueKind = PickleValue::Kind;

PickleValue PickleValue::Bool(bool v) {
  PickleValue p;
  p.kind = ValueKind::kBool;
  p.b = v;
  return p;
}

PickleValue PickleValue::Int(int64_t v) {
  PickleValue p;
  p.kind = ValueKind::kInt;
  p.i = v;
  return p;
}

PickleValue PickleValue::Float(double v) {
  PickleValue p;
  p.kind = ValueKind::kFloat;
  p.f = v;
  return p;
}

PickleValue PickleValue::Str(std::string utf8) {
  PickleValue p;
  p.kind = ValueKind::kStr;
  p.text = std::move(utf8);
  return p;
}

PickleValue PickleValue::Bytes(std::string bytes) {
  PickleValue p;
  p.kind = ValueKind::kBytes;
  p.text = std::move(bytes);
  return p;
}

PickleValue PickleValue::List(std::vector<PickleValue> items) {
  PickleValue p;
  p.kind = ValueKind::kList;
  p.items = std::move(items);
  return p;
}

PickleValue PickleValue::Tuple(std::vector<PickleValue> items) {
  PickleValue p;
  p.kind = ValueKind::kTuple;
  p.items = std::move(items);
  return p;
}

PickleValue PickleValue::Dict() {
  PickleValue p;
  p.kind = ValueKind::kDict;
  return p;
}

PickleValue PickleValue::Array(PickleDtype dtype, std::vector<uint64_t> shape,
                               std::vector<uint8_t> data) {
  PickleValue p;
  p.kind = ValueKind::kArray;
  p.dtype = dtype;
  p.shape = std::move(shape);
  p.data = std::move(data);
  return p;
}

PickleValue PickleValue::Float32Array(std::vector<uint64_t> shape, std::span<const float> values) {
  std::vector<uint8_t> bytes(values.size() * 4);
  for (size_t k = 0; k < values.size(); ++k) StoreLEF32(bytes.data() + 4 * k, values[k]);
  return Array(PickleDtype::kF32, std::move(shape), std::move(bytes));
}

PickleValue& PickleValue::Set(std::string key, PickleValue value) {
  for (auto& [k, v] : entries)
    if (k == key) {
      v = std::move(value);
      return *this;
    }
  entries.emplace_back(std::move(key), std::move(value));
  return *this;
}

namespace {

constexpr size_t kBatch = 1000;  // Python's _BATCHSIZE: items per APPENDS / SETITEMS

class Writer {
 public:
  absl::Status Value(const PickleValue& v);
  std::string out;

 private:
  // Where the value being written sits, turned into text only for an error.
  struct Step {
    bool is_key = false;
    std::string_view key;  // is_key: a dict key; else `index`, a list or tuple item
    size_t index = 0;
  };
  absl::Status Refuse(const std::string& what) const {
    std::string path;
    for (const Step& s : path_)
      absl::StrAppend(&path, s.is_key ? absl::StrCat(path.empty() ? "" : "/",
                                                     absl::CHexEscape(std::string(s.key)))
                                      : absl::StrCat("[", s.index, "]"));
    return absl::InvalidArgumentError(
        absl::StrCat("pickle value ", path.empty() ? "(the root)" : path, ": ", what));
  }
  absl::Status Child(const PickleValue& v, Step s) {
    path_.push_back(s);
    absl::Status st = Value(v);
    path_.pop_back();
    return st;
  }
  absl::Status CheckUtf8(std::string_view s, const char* what) const {
    for (size_t k = 0; k < s.size();) {
      const size_t n = Utf8CharLength(s, k);
      if (n == 0) return Refuse(absl::StrCat(what, " is not UTF-8 at byte ", k));
      k += n;
    }
    return absl::OkStatus();
  }
  absl::Status CheckArray(const PickleValue& v) const;

  void Op(uint8_t op) { out += char(op); }
  void LE(uint64_t v, int bytes) {
    for (int k = 0; k < bytes; ++k) out += char(uint8_t(v >> (8 * k)));
  }
  void Int(int64_t v);
  void Float(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    Op('G');
    for (int k = 7; k >= 0; --k) out += char(uint8_t(bits >> (8 * k)));  // big-endian
  }
  // A length-prefixed str or bytes: the 1-byte, 4-byte or 8-byte length opcode, as Python.
  void Counted(uint8_t op1, uint8_t op4, uint8_t op8, std::string_view s) {
    if (s.size() < 256) {
      Op(op1), LE(s.size(), 1);
    } else if (s.size() <= UINT32_MAX) {
      Op(op4), LE(s.size(), 4);
    } else {
      Op(op8), LE(s.size(), 8);
    }
    out += s;
  }
  void Str(std::string_view s) { Counted(0x8c, 'X', 0x8d, s); }   // SHORT_BINUNICODE...
  void Bytes(std::string_view s) { Counted('C', 'B', 0x8e, s); }  // SHORT_BINBYTES...
  void Global(std::string_view module, std::string_view name) {
    Str(module), Str(name), Op(0x93);  // STACK_GLOBAL
  }
  // A tuple of n items: MARK before them when n > 3, then EMPTY_TUPLE, TUPLE1-3 or TUPLE.
  void OpenTuple(size_t n) {
    if (n > 3) Op('(');
  }
  void CloseTuple(size_t n) { Op(n == 0 ? ')' : n <= 3 ? uint8_t(0x84 + n) : 't'); }
  void Array(const PickleValue& v);

  std::vector<Step> path_;
};

// Python's save_long: BININT1, BININT2, BININT, else LONG1 with the shortest little-endian
// two's complement.
void Writer::Int(int64_t v) {
  if (v >= 0 && v <= 0xff) {
    Op('K'), LE(uint64_t(v), 1);
  } else if (v >= 0 && v <= 0xffff) {
    Op('M'), LE(uint64_t(v), 2);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    Op('J'), LE(uint32_t(int32_t(v)), 4);
  } else {
    const uint64_t u = uint64_t(v);
    int n = 8;
    auto byte = [&](int k) { return uint8_t(u >> (8 * k)); };
    while (n > 1 && ((byte(n - 1) == 0x00 && !(byte(n - 2) & 0x80)) ||
                     (byte(n - 1) == 0xff && (byte(n - 2) & 0x80))))
      --n;
    Op(0x8a), LE(uint64_t(n), 1), LE(u, n);
  }
}

absl::Status Writer::CheckArray(const PickleValue& v) const {
  uint64_t bytes = PickleDtypeSize(v.dtype);
  for (uint64_t d : v.shape) {
    if (d > uint64_t(INT64_MAX)) return Refuse("an array dimension is above 2^63");
    if (__builtin_mul_overflow(bytes, d, &bytes))
      return Refuse("the array's shape x itemsize overflows 64 bits");
  }
  if (bytes != v.data.size())
    return Refuse(absl::StrCat("a ", PickleDtypeName(v.dtype), " array of shape [",
                               absl::StrJoin(v.shape, ", "), "] needs ", bytes, " bytes, has ",
                               v.data.size()));
  return absl::OkStatus();
}

// numpy's ndarray.__reduce_ex__(4): _reconstruct(ndarray, (0,), b'b'), then BUILD with
// (1, shape, dtype, is_fortran, data); the dtype is numpy.dtype(code, False, True) with BUILD
// (3, byte order, None, None, None, -1, -1, 0).
void Writer::Array(const PickleValue& v) {
  Global("numpy.core.multiarray", "_reconstruct");
  Global("numpy", "ndarray");
  Int(0), CloseTuple(1);
  Bytes("b");
  CloseTuple(3), Op('R');  // REDUCE
  OpenTuple(5), Int(1);
  OpenTuple(v.shape.size());
  for (uint64_t d : v.shape) Int(int64_t(d));
  CloseTuple(v.shape.size());
  Global("numpy", "dtype");
  Str(PickleDtypeCode(v.dtype)), Op(0x89), Op(0x88), CloseTuple(3), Op('R');
  OpenTuple(8), Int(3), Str(PickleDtypeSize(v.dtype) == 1 ? "|" : "<");
  Op('N'), Op('N'), Op('N'), Int(-1), Int(-1), Int(0), CloseTuple(8), Op('b');  // BUILD
  Op(0x89);  // is_fortran: False (C order)
  Bytes(std::string_view(reinterpret_cast<const char*>(v.data.data()), v.data.size()));
  CloseTuple(5), Op('b');
}

absl::Status Writer::Value(const PickleValue& v) {
  if (path_.size() > size_t(kPickleMaxWalkDepth))
    return Refuse(absl::StrCat("nests deeper than ", kPickleMaxWalkDepth, " containers"));
  switch (v.kind) {
    case ValueKind::kNone:
      Op('N');
      return absl::OkStatus();
    case ValueKind::kBool:
      Op(v.b ? 0x88 : 0x89);  // NEWTRUE / NEWFALSE
      return absl::OkStatus();
    case ValueKind::kInt:
      Int(v.i);
      return absl::OkStatus();
    case ValueKind::kFloat:
      Float(v.f);
      return absl::OkStatus();
    case ValueKind::kStr:
      CACT_RETURN_IF_ERROR(CheckUtf8(v.text, "the str"));
      Str(v.text);
      return absl::OkStatus();
    case ValueKind::kBytes:
      Bytes(v.text);
      return absl::OkStatus();
    case ValueKind::kTuple:
      OpenTuple(v.items.size());
      for (size_t k = 0; k < v.items.size(); ++k)
        CACT_RETURN_IF_ERROR(Child(v.items[k], {false, {}, k}));
      CloseTuple(v.items.size());
      return absl::OkStatus();
    case ValueKind::kList: {
      // CPython's batch_list_exact: one item is APPEND; more go MARK ... APPENDS by 1,000.
      Op(']');
      const bool single = v.items.size() == 1;
      for (size_t b = 0; b < v.items.size(); b += kBatch) {
        if (!single) Op('(');
        for (size_t k = b; k < std::min(b + kBatch, v.items.size()); ++k)
          CACT_RETURN_IF_ERROR(Child(v.items[k], {false, {}, k}));
        Op(single ? 'a' : 'e');
      }
      return absl::OkStatus();
    }
    case ValueKind::kDict: {
      // CPython's batch_dict_exact: one entry is SETITEM; more go MARK ... SETITEMS by 1,000
      // (it also ends a multiple of 1,000 with an empty MARK SETITEMS: pointless, left out).
      Op('}');
      const bool single = v.entries.size() == 1;
      absl::flat_hash_set<std::string_view> keys;
      for (size_t b = 0; b < v.entries.size(); b += kBatch) {
        if (!single) Op('(');
        for (size_t k = b; k < std::min(b + kBatch, v.entries.size()); ++k) {
          const auto& [key, value] = v.entries[k];
          path_.push_back({true, key});
          const absl::Status st = keys.insert(key).second ? CheckUtf8(key, "the dict key")
                                                          : Refuse("the dict has this key twice");
          path_.pop_back();
          CACT_RETURN_IF_ERROR(st);
          Str(key);
          CACT_RETURN_IF_ERROR(Child(value, {true, key}));
        }
        Op(single ? 's' : 'u');
      }
      return absl::OkStatus();
    }
    case ValueKind::kArray:
      CACT_RETURN_IF_ERROR(CheckArray(v));
      Array(v);
      return absl::OkStatus();
  }
  return Refuse("has an unknown kind");
}

}  // namespace

absl::StatusOr<std::string> SerializePickle(const PickleValue& root) {
  Writer w;
  w.out = "\x80\x04";  // PROTO 4
  CACT_RETURN_IF_ERROR(w.Value(root));
  w.out += '.';  // STOP
  return std::move(w.out);
}

absl::Status WritePickle(const std::string& path, const PickleValue& root) {
  CACT_ASSIGN_OR_RETURN(const std::string bytes, SerializePickle(root));
  return WriteFileAtomic(
      path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

}  // namespace cact
