#include "formats/pickle.h"

#include <charconv>
#include <cstring>
#include <deque>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "formats/le_bytes.h"
#include "lib/float16.h"
#include "lib/status.h"

namespace cact {

using Kind = PickleObject::Kind;

// Owns every object of a document; deques never move their elements, so pointers stay valid.
// Outside the anonymous namespace: the document's Arena derives from it.
namespace pickle_internal {
struct Store {
  std::deque<PickleObject> objects;
  std::deque<PickleArray> arrays;
  std::deque<std::string> strings;  // decoded text and latin-1 bytes
};
}  // namespace pickle_internal

struct PickleDocument::Arena : pickle_internal::Store {};

namespace {
constexpr PickleDtype kAllDtypes[] = {
    PickleDtype::kF16, PickleDtype::kF32, PickleDtype::kF64, PickleDtype::kI8,
    PickleDtype::kI16, PickleDtype::kI32, PickleDtype::kI64, PickleDtype::kU8,
    PickleDtype::kU16, PickleDtype::kU32, PickleDtype::kU64, PickleDtype::kBool};
}  // namespace

const char* PickleDtypeCode(PickleDtype t) {
  static constexpr const char* kCodes[] = {"f2", "f4", "f8", "i1", "i2", "i4",
                                           "i8", "u1", "u2", "u4", "u8", "b1"};
  return kCodes[size_t(t)];
}

const char* PickleDtypeName(PickleDtype t) {
  switch (t) {
    case PickleDtype::kF16:
      return "float16";
    case PickleDtype::kF32:
      return "float32";
    case PickleDtype::kF64:
      return "float64";
    case PickleDtype::kI8:
      return "int8";
    case PickleDtype::kI16:
      return "int16";
    case PickleDtype::kI32:
      return "int32";
    case PickleDtype::kI64:
      return "int64";
    case PickleDtype::kU8:
      return "uint8";
    case PickleDtype::kU16:
      return "uint16";
    case PickleDtype::kU32:
      return "uint32";
    case PickleDtype::kU64:
      return "uint64";
    case PickleDtype::kBool:
      return "bool";
  }
  return "?";
}

size_t PickleDtypeSize(PickleDtype t) {
  switch (t) {
    case PickleDtype::kI8:
    case PickleDtype::kU8:
    case PickleDtype::kBool:
      return 1;
    case PickleDtype::kF16:
    case PickleDtype::kI16:
    case PickleDtype::kU16:
      return 2;
    case PickleDtype::kF32:
    case PickleDtype::kI32:
    case PickleDtype::kU32:
      return 4;
    case PickleDtype::kF64:
    case PickleDtype::kI64:
    case PickleDtype::kU64:
      return 8;
  }
  return 0;
}

uint64_t PickleArray::NumElements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;  // checked against the byte count when parsed
  return n;
}

const PickleObject* PickleObject::Find(std::string_view key) const {
  if (kind != Kind::kDict) return nullptr;
  const PickleObject* found = nullptr;
  for (const auto& [k, v] : entries)
    if (k->kind == Kind::kStr && k->text == key) found = v;
  return found;
}

const char* PickleObject::TypeName() const {
  switch (kind) {
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kStr:
      return "str";
    case Kind::kBytes:
      return "bytes";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kSet:
      return "set";
    case Kind::kArray:
      return "ndarray";
  }
  return "?";
}

bool LooksLikePickle(std::span<const uint8_t> b) {
  if (b.size() >= 2 && b[0] == 0x80) return b[1] >= 2 && b[1] <= 5;
  if (!b.empty() && (b[0] == '}' || b[0] == ']')) return true;          // protocol 1 dict / list
  return b.size() >= 2 && b[0] == '(' && (b[1] == 'd' || b[1] == 'l');  // protocol 0
}

namespace {

constexpr size_t kMaxMarks = 10000;
constexpr size_t kMaxMemo = 1000000;

const char* OpName(uint8_t op) {
  switch (op) {
    case '(':
      return "MARK";
    case '.':
      return "STOP";
    case '0':
      return "POP";
    case '1':
      return "POP_MARK";
    case '2':
      return "DUP";
    case 'F':
      return "FLOAT";
    case 'I':
      return "INT";
    case 'J':
      return "BININT";
    case 'K':
      return "BININT1";
    case 'L':
      return "LONG";
    case 'M':
      return "BININT2";
    case 'N':
      return "NONE";
    case 'P':
      return "PERSID";
    case 'Q':
      return "BINPERSID";
    case 'R':
      return "REDUCE";
    case 'S':
      return "STRING";
    case 'T':
      return "BINSTRING";
    case 'U':
      return "SHORT_BINSTRING";
    case 'V':
      return "UNICODE";
    case 'X':
      return "BINUNICODE";
    case 'a':
      return "APPEND";
    case 'b':
      return "BUILD";
    case 'c':
      return "GLOBAL";
    case 'd':
      return "DICT";
    case '}':
      return "EMPTY_DICT";
    case 'e':
      return "APPENDS";
    case 'g':
      return "GET";
    case 'h':
      return "BINGET";
    case 'i':
      return "INST";
    case 'j':
      return "LONG_BINGET";
    case 'l':
      return "LIST";
    case ']':
      return "EMPTY_LIST";
    case 'o':
      return "OBJ";
    case 'p':
      return "PUT";
    case 'q':
      return "BINPUT";
    case 'r':
      return "LONG_BINPUT";
    case 's':
      return "SETITEM";
    case 't':
      return "TUPLE";
    case ')':
      return "EMPTY_TUPLE";
    case 'u':
      return "SETITEMS";
    case 'G':
      return "BINFLOAT";
    case 0x80:
      return "PROTO";
    case 0x81:
      return "NEWOBJ";
    case 0x82:
      return "EXT1";
    case 0x83:
      return "EXT2";
    case 0x84:
      return "EXT4";
    case 0x85:
      return "TUPLE1";
    case 0x86:
      return "TUPLE2";
    case 0x87:
      return "TUPLE3";
    case 0x88:
      return "NEWTRUE";
    case 0x89:
      return "NEWFALSE";
    case 0x8a:
      return "LONG1";
    case 0x8b:
      return "LONG4";
    case 'B':
      return "BINBYTES";
    case 'C':
      return "SHORT_BINBYTES";
    case 0x8c:
      return "SHORT_BINUNICODE";
    case 0x8d:
      return "BINUNICODE8";
    case 0x8e:
      return "BINBYTES8";
    case 0x8f:
      return "EMPTY_SET";
    case 0x90:
      return "ADDITEMS";
    case 0x91:
      return "FROZENSET";
    case 0x92:
      return "NEWOBJ_EX";
    case 0x93:
      return "STACK_GLOBAL";
    case 0x94:
      return "MEMOIZE";
    case 0x95:
      return "FRAME";
    case 0x96:
      return "BYTEARRAY8";
    case 0x97:
      return "NEXT_BUFFER";
    case 0x98:
      return "READONLY_BUFFER";
  }
  return nullptr;
}

enum class Global : uint8_t {
  kReconstruct,
  kFromBuffer,
  kScalar,
  kNdarray,
  kDtype,
  kCodecsEncode,
  kOrderedDict
};

// Objects that only feed REDUCE / BUILD (allowed globals, dtypes, arrays before their BUILD).
// They are arena objects of kind kNone with `i` = 1 + index here, and never leave the parser:
// putting one (or a tuple holding one) into a list, dict or set, or returning it, is refused.
struct Internal {
  enum class Tag : uint8_t { kGlobal, kDtype, kEmptyArray } tag;
  Global global = Global::kNdarray;
  PickleDtype dtype = PickleDtype::kF32;
  bool built = false;  // dtype: its BUILD state (the byte order) was applied
};

// Printable form of untrusted text for error messages (bounded, control bytes escaped).
std::string Printable(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 200; ++i) {
    const uint8_t c = uint8_t(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'')
      out += char(c);
    else
      out += absl::StrFormat("\\x%02x", c);
  }
  if (s.size() > 200) out += "...";
  return out;
}

void AppendUtf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    *out += char(cp);
  } else if (cp < 0x800) {
    *out += char(0xC0 | (cp >> 6));
    *out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += char(0xE0 | (cp >> 12));
    *out += char(0x80 | ((cp >> 6) & 0x3F));
    *out += char(0x80 | (cp & 0x3F));
  } else {
    *out += char(0xF0 | (cp >> 18));
    *out += char(0x80 | ((cp >> 12) & 0x3F));
    *out += char(0x80 | ((cp >> 6) & 0x3F));
    *out += char(0x80 | (cp & 0x3F));
  }
}

// Next code point of UTF-8 `s` at `*pos`, or -1 when the encoding is invalid. Surrogate code
// points are accepted: Python writes strings with 'surrogatepass'.
int32_t NextCodePoint(std::string_view s, size_t* pos) {
  const uint8_t c = uint8_t(s[*pos]);
  int len = 0;
  uint32_t cp = 0, min = 0;
  if (c < 0x80) {
    ++*pos;
    return c;
  } else if ((c & 0xE0) == 0xC0) {
    len = 2, cp = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, cp = c & 0x0F, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, cp = c & 0x07, min = 0x10000;
  } else {
    return -1;
  }
  if (s.size() - *pos < size_t(len)) return -1;
  for (int k = 1; k < len; ++k) {
    const uint8_t t = uint8_t(s[*pos + k]);
    if ((t & 0xC0) != 0x80) return -1;
    cp = (cp << 6) | (t & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF) return -1;
  *pos += len;
  return int32_t(cp);
}

bool ValidUtf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();)
    if (NextCodePoint(s, &pos) < 0) return false;
  return true;
}

// Python 2 str (STRING, BINSTRING, SHORT_BINSTRING): ASCII becomes str, anything else bytes
// (Python 2 numpy pickles carry array data this way).
Kind Py2Kind(std::string_view bytes) {
  for (char c : bytes)
    if (uint8_t(c) >= 0x80) return Kind::kBytes;
  return Kind::kStr;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Unpickler {
 public:
  Unpickler(std::span<const uint8_t> in, const std::string& name, pickle_internal::Store* arena)
      : in_(in), name_(name), arena_(arena) {}

  absl::StatusOr<const PickleObject*> Run(int* protocol);

 private:
  absl::Status Err(std::string_view what) const {
    const char* op = OpName(op_);
    const std::string field =
        op ? absl::StrFormat("pickle opcode %s", op) : absl::StrFormat("pickle opcode 0x%02x", op_);
    return FormatError(name_, field, op_offset_, what);
  }
  absl::Status Step(bool* stop);

  // Input.
  absl::Status Need(uint64_t n) const {
    if (n > in_.size() - pos_)
      return Err(absl::StrFormat("truncated: needs %d bytes, %d remain", n, in_.size() - pos_));
    return absl::OkStatus();
  }
  std::string_view Take(size_t n) {
    std::string_view s(reinterpret_cast<const char*>(in_.data()) + pos_, n);
    pos_ += n;
    return s;
  }
  absl::StatusOr<std::string_view> Line();
  absl::StatusOr<uint64_t> Length(int width, bool is_signed);

  // Objects.
  PickleObject* New(Kind k) {
    PickleObject& o = arena_->objects.emplace_back();
    o.kind = k;
    o.offset = op_offset_;
    return &o;
  }
  PickleObject* NewInt(int64_t v) {
    PickleObject* o = New(Kind::kInt);
    o->i = v;
    return o;
  }
  PickleObject* NewBool(bool v) {
    PickleObject* o = New(Kind::kBool);
    o->b = v;
    return o;
  }
  PickleObject* NewText(Kind k, std::string_view view) {
    PickleObject* o = New(k);
    o->text = view;
    return o;
  }
  PickleObject* NewOwnedText(Kind k, std::string s) {
    return NewText(k, arena_->strings.emplace_back(std::move(s)));
  }
  PickleObject* NewInternal(Internal in) {
    internals_.push_back(in);
    PickleObject* o = New(Kind::kNone);
    o->i = int64_t(internals_.size());
    return o;
  }
  Internal* InternalOf(const PickleObject* o) {
    if (o->kind != Kind::kNone || o->i == 0) return nullptr;
    return &internals_[size_t(o->i - 1)];
  }
  bool Tainted(const PickleObject* o) { return InternalOf(o) || tainted_.contains(o); }
  absl::Status CheckData(const PickleObject* o) {
    if (!Tainted(o)) return absl::OkStatus();
    return Err(
        "a numpy dtype, class or function object is only accepted as an argument of "
        "array or scalar reconstruction, not as data");
  }

  // Stack (the part above the innermost MARK is what an opcode sees).
  size_t Bottom() const { return marks_.empty() ? 0 : marks_.back(); }
  absl::Status Push(PickleObject* o) {
    if (stack_.size() >= in_.size()) return Err("stack longer than the input");
    stack_.push_back(o);
    return absl::OkStatus();
  }
  absl::StatusOr<PickleObject*> Pop() {
    if (stack_.size() <= Bottom()) return Err("stack underflow");
    PickleObject* o = stack_.back();
    stack_.pop_back();
    return o;
  }
  absl::StatusOr<PickleObject*> Top() {
    if (stack_.size() <= Bottom()) return Err("stack underflow");
    return stack_.back();
  }
  // The objects above the innermost MARK; the mark is removed.
  absl::StatusOr<size_t> PopMark() {
    if (marks_.empty()) return Err("no MARK to pop to");
    const size_t at = marks_.back();
    marks_.pop_back();
    return at;
  }
  absl::Status MakeTuple(size_t from);

  // Containers.
  absl::StatusOr<uint64_t> KeyId(const PickleObject* o, int depth);
  absl::Status SetItem(PickleObject* dict, const PickleObject* key, const PickleObject* value);
  absl::Status AddToSet(PickleObject* set, const PickleObject* item);
  absl::Status Append(PickleObject* list, const PickleObject* item) {
    CACT_RETURN_IF_ERROR(CheckData(item));
    if (list->kind != Kind::kList)
      return Err(absl::StrFormat("appends to a %s, not a list", list->TypeName()));
    list->items.push_back(item);
    return absl::OkStatus();
  }

  // Globals, REDUCE and BUILD.
  absl::Status PushGlobal(std::string_view module, std::string_view name);
  absl::Status Reduce(PickleObject* callable, PickleObject* args);
  absl::Status Build(PickleObject* obj, PickleObject* state);
  absl::StatusOr<PickleDtype> ParseDtype(std::string_view s);
  absl::StatusOr<std::span<const uint8_t>> RawBytes(const PickleObject* o, const char* what);
  absl::StatusOr<std::vector<uint64_t>> Shape(const PickleObject* o);
  absl::StatusOr<PickleDtype> BuiltDtype(const PickleObject* o);
  absl::Status FillArray(PickleObject* obj, PickleDtype dtype, std::vector<uint64_t> shape,
                         bool fortran, std::span<const uint8_t> data);
  absl::StatusOr<PickleObject*> Scalar(PickleDtype dtype, std::span<const uint8_t> bytes);

  // Protocol 0 text.
  absl::StatusOr<int64_t> DecimalInt(std::string_view s);
  absl::StatusOr<std::string> RawUnicodeEscape(std::string_view s);
  absl::StatusOr<std::string> EscapeDecode(std::string_view s);
  absl::StatusOr<PickleObject*> NewUnicode(std::string_view utf8);

  std::span<const uint8_t> in_;
  const std::string& name_;
  pickle_internal::Store* arena_;
  size_t pos_ = 0;
  uint8_t op_ = 0;
  uint64_t op_offset_ = 0;
  int protocol_ = 0;
  std::vector<PickleObject*> stack_;
  std::vector<size_t> marks_;
  absl::flat_hash_map<uint64_t, PickleObject*> memo_;
  std::vector<Internal> internals_;
  absl::flat_hash_set<const PickleObject*> tainted_;  // tuples holding internal objects
  // Hashable keys by value: Python's equality (1 == 1.0 == True) as one canonical string.
  absl::flat_hash_map<std::string, uint64_t> key_ids_;
  absl::flat_hash_map<const PickleObject*, uint64_t> object_key_ids_;
  // Per dict: key id -> entry index (later keys replace earlier ones); per set: members.
  absl::flat_hash_map<const PickleObject*, absl::flat_hash_map<uint64_t, size_t>> indexes_;
};

absl::StatusOr<std::string_view> Unpickler::Line() {
  const uint8_t* nl =
      static_cast<const uint8_t*>(std::memchr(in_.data() + pos_, '\n', in_.size() - pos_));
  if (!nl) return Err("truncated: no newline ends the argument");
  std::string_view s = Take(size_t(nl - (in_.data() + pos_)));
  ++pos_;
  return s;
}

absl::StatusOr<uint64_t> Unpickler::Length(int width, bool is_signed) {
  CACT_RETURN_IF_ERROR(Need(width));
  const uint8_t* p = in_.data() + pos_;
  pos_ += width;
  uint64_t n = width == 1 ? p[0] : width == 4 ? LoadLE32(p) : LoadLE64(p);
  if (is_signed && width == 4 && (n & 0x80000000u)) return Err("negative length");
  CACT_RETURN_IF_ERROR(Need(n));
  return n;
}

absl::StatusOr<int64_t> Unpickler::DecimalInt(std::string_view s) {
  if (!s.empty() && s.back() == 'L') s.remove_suffix(1);  // Python 2 longs
  int64_t v = 0;
  const char* b = s.data();
  if (!s.empty() && s[0] == '+') ++b;
  auto [end, ec] = std::from_chars(b, s.data() + s.size(), v);
  if (s.empty() || ec == std::errc::result_out_of_range)
    return Err(absl::StrFormat("integer '%s' is empty or outside int64", Printable(s)));
  if (ec != std::errc() || end != s.data() + s.size())
    return Err(absl::StrFormat("'%s' is not a decimal integer", Printable(s)));
  return v;
}

// Python's raw-unicode-escape: bytes are code points 0-255, except \uXXXX and \UXXXXXXXX
// after an odd run of backslashes. Returns UTF-8.
absl::StatusOr<std::string> Unpickler::RawUnicodeEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t run = 0;  // backslashes just before position i
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = uint8_t(s[i]);
    if (c == '\\') {
      ++run;
      if (i + 1 < s.size() && (run & 1) && (s[i + 1] == 'u' || s[i + 1] == 'U')) {
        const size_t digits = s[i + 1] == 'u' ? 4 : 8;
        if (s.size() - i - 2 < digits) return Err("truncated \\u escape in UNICODE");
        uint32_t cp = 0;
        for (size_t k = 0; k < digits; ++k) {
          const int d = HexDigit(s[i + 2 + k]);
          if (d < 0) return Err("bad \\u escape in UNICODE");
          cp = cp * 16 + uint32_t(d);
        }
        if (cp > 0x10FFFF) return Err("\\U escape beyond U+10FFFF in UNICODE");
        AppendUtf8(&out, cp);
        i += 2 + digits;
        run = 0;
        continue;
      }
      AppendUtf8(&out, c);
      ++i;
      continue;
    }
    run = 0;
    AppendUtf8(&out, c);
    ++i;
  }
  return out;
}

// Python's escape_decode of a quoted STRING argument (quotes already stripped).
absl::StatusOr<std::string> Unpickler::EscapeDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (++i == s.size()) return Err("STRING ends with a lone backslash");
    const char c = s[i];
    switch (c) {
      case '\n':
        break;
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case 'x': {
        if (s.size() - i - 1 < 2 || HexDigit(s[i + 1]) < 0 || HexDigit(s[i + 2]) < 0)
          return Err("bad \\x escape in STRING");
        out += char(HexDigit(s[i + 1]) * 16 + HexDigit(s[i + 2]));
        i += 2;
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          int v = 0, k = 0;
          for (; k < 3 && i + k < s.size() && s[i + k] >= '0' && s[i + k] <= '7'; ++k)
            v = v * 8 + (s[i + k] - '0');
          out += char(v & 0xFF);
          i += k - 1;
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

absl::StatusOr<PickleObject*> Unpickler::NewUnicode(std::string_view utf8) {
  if (!ValidUtf8(utf8)) return Err("string is not valid UTF-8");
  return NewText(Kind::kStr, utf8);
}

absl::Status Unpickler::MakeTuple(size_t from) {
  PickleObject* t = New(Kind::kTuple);
  t->items.assign(stack_.begin() + ptrdiff_t(from), stack_.end());
  stack_.resize(from);
  for (const PickleObject* o : t->items)
    if (Tainted(o)) {
      tainted_.insert(t);
      break;
    }
  return Push(t);
}

absl::StatusOr<uint64_t> Unpickler::KeyId(const PickleObject* o, int depth) {
  if (auto it = object_key_ids_.find(o); it != object_key_ids_.end()) return it->second;
  if (depth > kPickleMaxWalkDepth) return Err("dict key nests tuples too deeply");
  std::string canon;
  auto int_key = [&](int64_t v) {
    canon = "i";
    canon.append(reinterpret_cast<const char*>(&v), 8);
  };
  switch (o->kind) {
    case Kind::kNone:
      canon = "n";
      break;
    case Kind::kBool:
      int_key(o->b);
      break;
    case Kind::kInt:
      int_key(o->i);
      break;
    case Kind::kFloat: {
      const double f = o->f;
      if (f == f && f >= -9223372036854775808.0 && f < 9223372036854775808.0 &&
          double(int64_t(f)) == f) {
        int_key(int64_t(f));
      } else {
        canon = "f";
        canon.append(reinterpret_cast<const char*>(&f), 8);
      }
      break;
    }
    case Kind::kStr:
      canon = "s";
      canon += o->text;
      break;
    case Kind::kBytes:
      canon = "b";
      canon += o->text;
      break;
    case Kind::kTuple:
      canon = "t";
      for (const PickleObject* item : o->items) {
        CACT_ASSIGN_OR_RETURN(uint64_t id, KeyId(item, depth + 1));
        canon.append(reinterpret_cast<const char*>(&id), 8);
      }
      break;
    default:
      return Err(absl::StrFormat("a %s is not a supported dict key or set member", o->TypeName()));
  }
  const uint64_t id = key_ids_.try_emplace(std::move(canon), key_ids_.size()).first->second;
  object_key_ids_.emplace(o, id);
  return id;
}

absl::Status Unpickler::SetItem(PickleObject* dict, const PickleObject* key,
                                const PickleObject* value) {
  CACT_RETURN_IF_ERROR(CheckData(key));
  CACT_RETURN_IF_ERROR(CheckData(value));
  if (dict->kind != Kind::kDict)
    return Err(absl::StrFormat("sets an item of a %s, not a dict", dict->TypeName()));
  CACT_ASSIGN_OR_RETURN(const uint64_t id, KeyId(key, 0));
  auto [it, fresh] = indexes_[dict].try_emplace(id, dict->entries.size());
  if (fresh)
    dict->entries.emplace_back(key, value);
  else
    dict->entries[it->second].second = value;  // Python: the later value wins, order kept
  return absl::OkStatus();
}

absl::Status Unpickler::AddToSet(PickleObject* set, const PickleObject* item) {
  CACT_RETURN_IF_ERROR(CheckData(item));
  CACT_ASSIGN_OR_RETURN(const uint64_t id, KeyId(item, 0));
  if (indexes_[set].try_emplace(id, set->items.size()).second) set->items.push_back(item);
  return absl::OkStatus();
}

absl::Status Unpickler::PushGlobal(std::string_view module, std::string_view name) {
  struct Allowed {
    const char* module;
    const char* name;
    Global g;
  };
  static constexpr Allowed kAllowed[] = {
      {"numpy.core.multiarray", "_reconstruct", Global::kReconstruct},
      {"numpy._core.multiarray", "_reconstruct", Global::kReconstruct},
      {"numpy.core.numeric", "_frombuffer", Global::kFromBuffer},
      {"numpy._core.numeric", "_frombuffer", Global::kFromBuffer},
      {"numpy.core.multiarray", "scalar", Global::kScalar},
      {"numpy._core.multiarray", "scalar", Global::kScalar},
      {"numpy", "ndarray", Global::kNdarray},
      {"numpy", "dtype", Global::kDtype},
      {"_codecs", "encode", Global::kCodecsEncode},
      {"collections", "OrderedDict", Global::kOrderedDict},
  };
  for (const Allowed& a : kAllowed)
    if (module == a.module && name == a.name) {
      Internal in{Internal::Tag::kGlobal};
      in.global = a.g;
      return Push(NewInternal(in));
    }
  return Err(absl::StrFormat(
      "global '%s.%s' is not allowed (only numpy array reconstruction, _codecs.encode and "
      "OrderedDict are)",
      Printable(module), Printable(name)));
}

absl::StatusOr<PickleDtype> Unpickler::ParseDtype(std::string_view s) {
  if (!s.empty() && (s[0] == '<' || s[0] == '|' || s[0] == '=')) s.remove_prefix(1);
  if (!s.empty() && s[0] == '>')
    return Err(
        absl::StrFormat("numpy.dtype: big-endian dtype '%s' is not supported", Printable(s)));
  for (const PickleDtype t : kAllDtypes)
    if (s == PickleDtypeCode(t)) return t;
  if (!s.empty() && s[0] == 'O') return Err("numpy.dtype: object arrays are not supported");
  return Err(absl::StrFormat(
      "numpy.dtype '%s' is not supported (f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1)", Printable(s)));
}

absl::StatusOr<std::span<const uint8_t>> Unpickler::RawBytes(const PickleObject* o,
                                                             const char* what) {
  if (o->kind == Kind::kList) return Err(absl::StrFormat("%s: object arrays are refused", what));
  if (o->kind != Kind::kBytes)
    return Err(absl::StrFormat("%s: data is a %s, not bytes", what, o->TypeName()));
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(o->text.data()), o->text.size());
}

absl::StatusOr<std::vector<uint64_t>> Unpickler::Shape(const PickleObject* o) {
  if (o->kind != Kind::kTuple)
    return Err(absl::StrFormat("array shape is a %s, not a tuple", o->TypeName()));
  std::vector<uint64_t> shape;
  shape.reserve(o->items.size());
  for (const PickleObject* d : o->items) {
    if (d->kind != Kind::kInt || d->i < 0)
      return Err("array shape holds something other than a non-negative int");
    shape.push_back(uint64_t(d->i));
  }
  return shape;
}

absl::StatusOr<PickleDtype> Unpickler::BuiltDtype(const PickleObject* o) {
  const Internal* in = InternalOf(o);
  if (!in || in->tag != Internal::Tag::kDtype)
    return Err(absl::StrFormat("expected a numpy.dtype, got a %s", o->TypeName()));
  if (!in->built) return Err("numpy.dtype used before its state (byte order) was set");
  return in->dtype;
}

absl::Status Unpickler::FillArray(PickleObject* obj, PickleDtype dtype, std::vector<uint64_t> shape,
                                  bool fortran, std::span<const uint8_t> data) {
  uint64_t bytes = PickleDtypeSize(dtype);
  for (uint64_t d : shape)
    if (__builtin_mul_overflow(bytes, d, &bytes))
      return Err("array shape x itemsize overflows 64 bits");
  if (bytes != data.size())
    return Err(
        absl::StrFormat("array of shape x itemsize %d bytes carries %d bytes", bytes, data.size()));
  PickleArray& a = arena_->arrays.emplace_back();
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.fortran_order = fortran;
  a.data = data;
  obj->kind = Kind::kArray;
  obj->i = 0;
  obj->array = &a;
  return absl::OkStatus();
}

absl::StatusOr<PickleObject*> Unpickler::Scalar(PickleDtype dtype, std::span<const uint8_t> b) {
  if (b.size() != PickleDtypeSize(dtype))
    return Err(
        absl::StrFormat("numpy scalar of %s carries %d bytes", PickleDtypeName(dtype), b.size()));
  const uint8_t* p = b.data();
  auto as_int = [&](int64_t v) { return NewInt(v); };
  auto as_float = [&](double v) {
    PickleObject* o = New(Kind::kFloat);
    o->f = v;
    return o;
  };
  switch (dtype) {
    case PickleDtype::kBool:
      return NewBool(p[0] != 0);
    case PickleDtype::kI8:
      return as_int(int8_t(p[0]));
    case PickleDtype::kU8:
      return as_int(p[0]);
    case PickleDtype::kI16:
      return as_int(int16_t(LoadLE16(p)));
    case PickleDtype::kU16:
      return as_int(LoadLE16(p));
    case PickleDtype::kI32:
      return as_int(int32_t(LoadLE32(p)));
    case PickleDtype::kU32:
      return as_int(LoadLE32(p));
    case PickleDtype::kI64:
      return as_int(int64_t(LoadLE64(p)));
    case PickleDtype::kU64:
      if (LoadLE64(p) > uint64_t(INT64_MAX)) return Err("numpy uint64 scalar outside int64");
      return as_int(int64_t(LoadLE64(p)));
    case PickleDtype::kF16:
      return as_float(HalfBitsToFloat(LoadLE16(p)));
    case PickleDtype::kF32:
      return as_float(LoadLEF32(p));
    case PickleDtype::kF64: {
      double d;
      std::memcpy(&d, p, 8);
      return as_float(d);
    }
  }
  return Err("numpy scalar of an unknown dtype");
}

absl::Status Unpickler::Reduce(PickleObject* callable, PickleObject* args) {
  const Internal* fn = InternalOf(callable);
  if (!fn || fn->tag != Internal::Tag::kGlobal)
    return Err(absl::StrFormat("calls a %s, not an allowed global", callable->TypeName()));
  if (args->kind != Kind::kTuple)
    return Err(absl::StrFormat("arguments are a %s, not a tuple", args->TypeName()));
  const std::vector<const PickleObject*>& a = args->items;
  auto arity = [&](const char* f, size_t n) -> absl::Status {
    if (a.size() == n) return absl::OkStatus();
    return Err(absl::StrFormat("%s takes %d arguments here, got %d", f, n, a.size()));
  };
  switch (fn->global) {
    case Global::kDtype: {
      CACT_RETURN_IF_ERROR(arity("numpy.dtype", 3));
      if (a[0]->kind != Kind::kStr) return Err("numpy.dtype: the type is not a str");
      CACT_ASSIGN_OR_RETURN(PickleDtype t, ParseDtype(a[0]->text));
      Internal in{Internal::Tag::kDtype};
      in.dtype = t;
      return Push(NewInternal(in));
    }
    case Global::kReconstruct: {
      CACT_RETURN_IF_ERROR(arity("numpy _reconstruct", 3));
      const Internal* cls = InternalOf(a[0]);
      if (!cls || cls->tag != Internal::Tag::kGlobal || cls->global != Global::kNdarray)
        return Err("numpy _reconstruct: the class is not numpy.ndarray");
      if (a[1]->kind != Kind::kTuple) return Err("numpy _reconstruct: the shape is not a tuple");
      return Push(NewInternal(Internal{Internal::Tag::kEmptyArray}));
    }
    case Global::kFromBuffer: {
      CACT_RETURN_IF_ERROR(arity("numpy _frombuffer", 4));
      CACT_ASSIGN_OR_RETURN(auto data, RawBytes(a[0], "numpy _frombuffer"));
      CACT_ASSIGN_OR_RETURN(PickleDtype t, BuiltDtype(a[1]));
      CACT_ASSIGN_OR_RETURN(auto shape, Shape(a[2]));
      if (a[3]->kind != Kind::kStr || (a[3]->text != "C" && a[3]->text != "F"))
        return Err("numpy _frombuffer: order is not 'C' or 'F'");
      PickleObject* o = New(Kind::kNone);
      CACT_RETURN_IF_ERROR(FillArray(o, t, std::move(shape), a[3]->text == "F", data));
      return Push(o);
    }
    case Global::kScalar: {
      CACT_RETURN_IF_ERROR(arity("numpy scalar", 2));
      CACT_ASSIGN_OR_RETURN(PickleDtype t, BuiltDtype(a[0]));
      CACT_ASSIGN_OR_RETURN(auto data, RawBytes(a[1], "numpy scalar"));
      CACT_ASSIGN_OR_RETURN(PickleObject * o, Scalar(t, data));
      return Push(o);
    }
    case Global::kCodecsEncode: {
      CACT_RETURN_IF_ERROR(arity("_codecs.encode", 2));
      if (a[0]->kind != Kind::kStr || a[1]->kind != Kind::kStr || a[1]->text != "latin1")
        return Err("_codecs.encode: only (str, 'latin1') is accepted");
      std::string out;
      out.reserve(a[0]->text.size());
      for (size_t pos = 0; pos < a[0]->text.size();) {
        const int32_t cp = NextCodePoint(a[0]->text, &pos);
        if (cp < 0 || cp > 0xFF) return Err("_codecs.encode: a character is not latin-1");
        out += char(cp);
      }
      return Push(NewOwnedText(Kind::kBytes, std::move(out)));
    }
    case Global::kOrderedDict: {
      if (a.size() > 1) return Err("collections.OrderedDict takes at most 1 argument");
      PickleObject* d = New(Kind::kDict);
      if (a.size() == 1) {
        const PickleObject* pairs = a[0];
        if (pairs->kind != Kind::kList && pairs->kind != Kind::kTuple)
          return Err("collections.OrderedDict: the argument is not a list of pairs");
        for (const PickleObject* p : pairs->items) {
          if ((p->kind != Kind::kList && p->kind != Kind::kTuple) || p->items.size() != 2)
            return Err("collections.OrderedDict: an item is not a (key, value) pair");
          CACT_RETURN_IF_ERROR(SetItem(d, p->items[0], p->items[1]));
        }
      }
      return Push(d);
    }
    case Global::kNdarray:
      return Err("numpy.ndarray is only accepted as _reconstruct's class");
  }
  return Err("unknown global");
}

absl::Status Unpickler::Build(PickleObject* obj, PickleObject* state) {
  Internal* in = InternalOf(obj);
  if (!in || in->tag == Internal::Tag::kGlobal)
    return Err(
        absl::StrFormat("sets the state of a %s (only numpy dtypes and arrays)", obj->TypeName()));
  if (state->kind != Kind::kTuple) return Err("state is not a tuple");
  const std::vector<const PickleObject*>& s = state->items;
  if (in->tag == Internal::Tag::kDtype) {
    // (3, byteorder, subarray, names, fields, elsize, alignment, flags[, metadata if 4])
    if (s.empty() || s[0]->kind != Kind::kInt || (s[0]->i == 3 && s.size() != 8) ||
        (s[0]->i == 4 && s.size() != 9) || (s[0]->i != 3 && s[0]->i != 4))
      return Err("numpy.dtype state is not a version 3 or 4 tuple");
    if (s[1]->kind != Kind::kStr) return Err("numpy.dtype state: byte order is not a str");
    const std::string_view order = s[1]->text;
    if (order == ">") return Err("numpy.dtype: big-endian arrays are not supported");
    if (order != "<" && order != "|" && order != "=")
      return Err(absl::StrFormat("numpy.dtype state: byte order '%s'", Printable(order)));
    if (s[2]->kind != Kind::kNone || s[3]->kind != Kind::kNone || s[4]->kind != Kind::kNone)
      return Err("numpy.dtype: structured and subarray dtypes are not supported");
    if (s[5]->kind != Kind::kInt || s[6]->kind != Kind::kInt || s[7]->kind != Kind::kInt)
      return Err("numpy.dtype state: elsize, alignment or flags is not an int");
    if (s[5]->i != -1 || s[6]->i != -1)
      return Err("numpy.dtype: dtypes with their own size or alignment are not supported");
    in->built = true;
    return absl::OkStatus();
  }
  // numpy.ndarray.__setstate__: (version 1, shape, dtype, is_fortran, raw data).
  if (s.size() != 5 || s[0]->kind != Kind::kInt || s[0]->i != 1)
    return Err("numpy array state is not (1, shape, dtype, is_fortran, data)");
  CACT_ASSIGN_OR_RETURN(auto shape, Shape(s[1]));
  CACT_ASSIGN_OR_RETURN(PickleDtype t, BuiltDtype(s[2]));
  if (s[3]->kind != Kind::kBool && s[3]->kind != Kind::kInt)
    return Err("numpy array state: is_fortran is not a bool");
  const bool fortran = s[3]->kind == Kind::kBool ? s[3]->b : s[3]->i != 0;
  CACT_ASSIGN_OR_RETURN(auto data, RawBytes(s[4], "numpy array"));
  return FillArray(obj, t, std::move(shape), fortran, data);
}

absl::Status Unpickler::Step(bool* stop) {
  op_offset_ = pos_;
  op_ = in_[pos_++];
  switch (op_) {
    case '(':  // MARK
      if (marks_.size() >= kMaxMarks)
        return Err(absl::StrFormat("more than %d nested MARKs", kMaxMarks));
      marks_.push_back(stack_.size());
      return absl::OkStatus();
    case '.':  // STOP
      if (!marks_.empty()) return Err("MARK left open at STOP");
      if (stack_.size() != 1)
        return Err(absl::StrFormat("STOP leaves %d objects on the stack, not 1", stack_.size()));
      CACT_RETURN_IF_ERROR(CheckData(stack_.back()));
      *stop = true;
      return absl::OkStatus();
    case '0':  // POP (or, on an empty stack, the MARK: Python's behaviour)
      if (stack_.size() > Bottom()) {
        stack_.pop_back();
        return absl::OkStatus();
      }
      [[fallthrough]];
    case '1': {  // POP_MARK
      CACT_ASSIGN_OR_RETURN(size_t at, PopMark());
      stack_.resize(at);
      return absl::OkStatus();
    }
    case '2': {  // DUP
      CACT_ASSIGN_OR_RETURN(PickleObject * o, Top());
      return Push(o);
    }
    case 'F': {  // FLOAT
      CACT_ASSIGN_OR_RETURN(std::string_view s, Line());
      double v = 0;
      auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (s.empty() || ec != std::errc() || end != s.data() + s.size())
        return Err(absl::StrFormat("'%s' is not a float", Printable(s)));
      PickleObject* o = New(Kind::kFloat);
      o->f = v;
      return Push(o);
    }
    case 'I': {  // INT ("00" / "01" are False / True)
      CACT_ASSIGN_OR_RETURN(std::string_view s, Line());
      if (s == "00" || s == "01") return Push(NewBool(s == "01"));
      CACT_ASSIGN_OR_RETURN(int64_t v, DecimalInt(s));
      return Push(NewInt(v));
    }
    case 'L': {  // LONG
      CACT_ASSIGN_OR_RETURN(std::string_view s, Line());
      CACT_ASSIGN_OR_RETURN(int64_t v, DecimalInt(s));
      return Push(NewInt(v));
    }
    case 'J':  // BININT
      CACT_RETURN_IF_ERROR(Need(4));
      pos_ += 4;
      return Push(NewInt(int32_t(LoadLE32(in_.data() + pos_ - 4))));
    case 'K':  // BININT1
      CACT_RETURN_IF_ERROR(Need(1));
      return Push(NewInt(in_[pos_++]));
    case 'M':  // BININT2
      CACT_RETURN_IF_ERROR(Need(2));
      pos_ += 2;
      return Push(NewInt(LoadLE16(in_.data() + pos_ - 2)));
    case 0x8a:    // LONG1
    case 0x8b: {  // LONG4: little-endian two's complement
      CACT_ASSIGN_OR_RETURN(uint64_t n, Length(op_ == 0x8a ? 1 : 4, true));
      const uint8_t* p = in_.data() + pos_;
      pos_ += n;
      if (n == 0) return Push(NewInt(0));
      const uint8_t fill = (p[n - 1] & 0x80) ? 0xFF : 0x00;
      for (uint64_t k = 8; k < n; ++k)
        if (p[k] != fill) return Err("integer outside int64");
      if (n > 8 && ((p[7] & 0x80) ? 0xFF : 0x00) != fill) return Err("integer outside int64");
      uint64_t v = fill == 0xFF ? ~uint64_t{0} : 0;
      for (uint64_t k = 0; k < n && k < 8; ++k) {
        v &= ~(uint64_t{0xFF} << (8 * k));
        v |= uint64_t(p[k]) << (8 * k);
      }
      return Push(NewInt(int64_t(v)));
    }
    case 'G': {  // BINFLOAT: big-endian double
      CACT_RETURN_IF_ERROR(Need(8));
      uint64_t bits = 0;
      for (int k = 0; k < 8; ++k) bits = (bits << 8) | in_[pos_ + k];
      pos_ += 8;
      PickleObject* o = New(Kind::kFloat);
      std::memcpy(&o->f, &bits, 8);
      return Push(o);
    }
    case 'N':
      return Push(New(Kind::kNone));
    case 0x88:
      return Push(NewBool(true));
    case 0x89:
      return Push(NewBool(false));
    case 'S': {  // STRING: a quoted Python 2 repr
      CACT_ASSIGN_OR_RETURN(std::string_view s, Line());
      if (s.size() < 2 || s.front() != s.back() || (s.front() != '\'' && s.front() != '"'))
        return Err("the argument is not quoted");
      CACT_ASSIGN_OR_RETURN(std::string d, EscapeDecode(s.substr(1, s.size() - 2)));
      const Kind k = Py2Kind(d);
      return Push(NewOwnedText(k, std::move(d)));
    }
    case 'T':    // BINSTRING
    case 'U': {  // SHORT_BINSTRING
      CACT_ASSIGN_OR_RETURN(uint64_t n, Length(op_ == 'U' ? 1 : 4, true));
      const std::string_view b = Take(n);
      return Push(NewText(Py2Kind(b), b));
    }
    case 'V': {  // UNICODE: raw-unicode-escape
      CACT_ASSIGN_OR_RETURN(std::string_view s, Line());
      CACT_ASSIGN_OR_RETURN(std::string d, RawUnicodeEscape(s));
      return Push(NewOwnedText(Kind::kStr, std::move(d)));
    }
    case 'X':     // BINUNICODE
    case 0x8c:    // SHORT_BINUNICODE
    case 0x8d: {  // BINUNICODE8
      CACT_ASSIGN_OR_RETURN(uint64_t n, Length(op_ == 0x8c ? 1 : op_ == 'X' ? 4 : 8, false));
      CACT_ASSIGN_OR_RETURN(PickleObject * o, NewUnicode(Take(n)));
      return Push(o);
    }
    case 'B':     // BINBYTES
    case 'C':     // SHORT_BINBYTES
    case 0x8e:    // BINBYTES8
    case 0x96: {  // BYTEARRAY8 (read as bytes)
      CACT_ASSIGN_OR_RETURN(uint64_t n, Length(op_ == 'C' ? 1 : op_ == 'B' ? 4 : 8, false));
      return Push(NewText(Kind::kBytes, Take(n)));
    }
    case ')':
      return Push(New(Kind::kTuple));
    case 0x85:
    case 0x86:
    case 0x87: {  // TUPLE1..3
      const size_t n = op_ - 0x84;
      if (stack_.size() < Bottom() + n) return Err("stack underflow");
      return MakeTuple(stack_.size() - n);
    }
    case 't': {  // TUPLE
      CACT_ASSIGN_OR_RETURN(size_t at, PopMark());
      return MakeTuple(at);
    }
    case ']':
      return Push(New(Kind::kList));
    case 'l': {  // LIST
      CACT_ASSIGN_OR_RETURN(size_t at, PopMark());
      PickleObject* list = New(Kind::kList);
      for (size_t k = at; k < stack_.size(); ++k) CACT_RETURN_IF_ERROR(Append(list, stack_[k]));
      stack_.resize(at);
      return Push(list);
    }
    case 'a': {  // APPEND
      CACT_ASSIGN_OR_RETURN(PickleObject * item, Pop());
      CACT_ASSIGN_OR_RETURN(PickleObject * list, Top());
      return Append(list, item);
    }
    case 'e': {  // APPENDS
      CACT_ASSIGN_OR_RETURN(size_t at, PopMark());
      if (at <= Bottom()) return Err("no list below the MARK");
      PickleObject* list = stack_[at - 1];
      for (size_t k = at; k < stack_.size(); ++k) CACT_RETURN_IF_ERROR(Append(list, stack_[k]));
      stack_.resize(at);
      return absl::OkStatus();
    }
    case '}':
      return Push(New(Kind::kDict));
    case 'd': {  // DICT
      CACT_ASSIGN_OR_RETURN(size_t at, PopMark());
      if ((stack_.size() - at) % 2) return Err("odd number of items for a dict");
      PickleObject* dict = New(Kind::kDict);
      for (size_t k = at; k < stack_.size(); k += 2)
        CACT_RETURN_IF_ERROR(SetItem(dict, stack_[k], stack_[k + 1]));
      stack_.resize(at);
      return Push(dict);
    }
    case 's': {  // SETITEM
      CACT_ASSIGN_OR_RETURN(PickleObject * value, Pop());
      CACT_ASSIGN_OR_RETURN(PickleObject * key, Pop());
      CACT_ASSIGN_OR_RETURN(PickleObject * dict, Top());
      return SetItem(dict, key, value);
    }
    case 'u': {  // SETITEMS
      CACT_ASSIGN_OR_RETURN(size_t at, PopMark());
      if (at <= Bottom()) return Err("no dict below the MARK");
      if ((stack_.size() - at) % 2) return Err("odd number of items for a dict");
      PickleObject* dict = stack_[at - 1];
      for (size_t k = at; k < stack_.size(); k += 2)
        CACT_RETURN_IF_ERROR(SetItem(dict, stack_[k], stack_[k + 1]));
      stack_.resize(at);
      return absl::OkStatus();
    }
    case 0x8f:
      return Push(New(Kind::kSet));
    case 0x90: {  // ADDITEMS
      CACT_ASSIGN_OR_RETURN(size_t at, PopMark());
      if (at <= Bottom()) return Err("no set below the MARK");
      PickleObject* set = stack_[at - 1];
      if (set->kind != Kind::kSet)
        return Err(absl::StrFormat("adds items to a %s, not a set", set->TypeName()));
      for (size_t k = at; k < stack_.size(); ++k) CACT_RETURN_IF_ERROR(AddToSet(set, stack_[k]));
      stack_.resize(at);
      return absl::OkStatus();
    }
    case 0x91: {  // FROZENSET
      CACT_ASSIGN_OR_RETURN(size_t at, PopMark());
      PickleObject* set = New(Kind::kSet);
      for (size_t k = at; k < stack_.size(); ++k) CACT_RETURN_IF_ERROR(AddToSet(set, stack_[k]));
      stack_.resize(at);
      return Push(set);
    }
    case 'g':    // GET
    case 'h':    // BINGET
    case 'j': {  // LONG_BINGET
      uint64_t key = 0;
      if (op_ == 'g') {
        CACT_ASSIGN_OR_RETURN(std::string_view s, Line());
        CACT_ASSIGN_OR_RETURN(int64_t v, DecimalInt(s));
        key = uint64_t(v);
      } else {
        const int w = op_ == 'h' ? 1 : 4;
        CACT_RETURN_IF_ERROR(Need(w));
        key = w == 1 ? in_[pos_] : LoadLE32(in_.data() + pos_);
        pos_ += w;
      }
      auto it = memo_.find(key);
      if (it == memo_.end()) return Err(absl::StrFormat("memo key %d was never stored", key));
      return Push(it->second);
    }
    case 'p':     // PUT
    case 'q':     // BINPUT
    case 'r':     // LONG_BINPUT
    case 0x94: {  // MEMOIZE
      uint64_t key = memo_.size();
      if (op_ == 'p') {
        CACT_ASSIGN_OR_RETURN(std::string_view s, Line());
        CACT_ASSIGN_OR_RETURN(int64_t v, DecimalInt(s));
        if (v < 0) return Err("negative memo key");
        key = uint64_t(v);
      } else if (op_ != 0x94) {
        const int w = op_ == 'q' ? 1 : 4;
        CACT_RETURN_IF_ERROR(Need(w));
        key = w == 1 ? in_[pos_] : LoadLE32(in_.data() + pos_);
        pos_ += w;
      }
      CACT_ASSIGN_OR_RETURN(PickleObject * top, Top());
      if (memo_.size() >= kMaxMemo && !memo_.contains(key))
        return Err(absl::StrFormat("more than %d memo entries", kMaxMemo));
      memo_[key] = top;
      return absl::OkStatus();
    }
    case 'c': {  // GLOBAL "module\nname\n"
      CACT_ASSIGN_OR_RETURN(std::string_view module, Line());
      CACT_ASSIGN_OR_RETURN(std::string_view name, Line());
      return PushGlobal(module, name);
    }
    case 0x93: {  // STACK_GLOBAL
      CACT_ASSIGN_OR_RETURN(PickleObject * name, Pop());
      CACT_ASSIGN_OR_RETURN(PickleObject * module, Pop());
      if (module->kind != Kind::kStr || name->kind != Kind::kStr)
        return Err("module or name is not a str");
      return PushGlobal(module->text, name->text);
    }
    case 'R': {  // REDUCE
      CACT_ASSIGN_OR_RETURN(PickleObject * args, Pop());
      CACT_ASSIGN_OR_RETURN(PickleObject * callable, Pop());
      return Reduce(callable, args);
    }
    case 'b': {  // BUILD
      CACT_ASSIGN_OR_RETURN(PickleObject * state, Pop());
      CACT_ASSIGN_OR_RETURN(PickleObject * obj, Top());
      return Build(obj, state);
    }
    case 0x80: {  // PROTO
      CACT_RETURN_IF_ERROR(Need(1));
      const int v = in_[pos_++];
      if (v > 5) return Err(absl::StrFormat("protocol %d is not supported (0-5)", v));
      if (op_offset_ == 0) protocol_ = v;
      return absl::OkStatus();
    }
    case 0x95: {  // FRAME: a length prefix only (the frame's bytes follow in place)
      CACT_RETURN_IF_ERROR(Length(8, false).status());
      return absl::OkStatus();
    }
    case 'i':
    case 'o':
    case 0x81:
    case 0x92:
      return Err("not allowed: it builds an arbitrary object");
    case 'P':
    case 'Q':
      return Err("not allowed: persistent ids need an external loader");
    case 0x82:
    case 0x83:
    case 0x84:
      return Err("not allowed: the extension registry names arbitrary objects");
    case 0x97:
    case 0x98:
      return Err("not allowed: out-of-band buffers are not supported");
    default:
      return Err("unknown opcode");
  }
}

absl::StatusOr<const PickleObject*> Unpickler::Run(int* protocol) {
  bool stop = false;
  while (!stop) {
    if (pos_ >= in_.size())
      return FormatError(name_, "pickle", pos_, "truncated: ends without STOP");
    CACT_RETURN_IF_ERROR(Step(&stop));
  }
  *protocol = protocol_;
  return stack_.back();
}

}  // namespace

absl::StatusOr<PickleDocument> PickleDocument::Parse(FileBytes bytes) {
  PickleDocument doc;
  doc.bytes_ = std::move(bytes);
  doc.arena_ = std::make_shared<Arena>();
  Unpickler u(doc.bytes_.span(), doc.bytes_.path(), doc.arena_.get());
  CACT_ASSIGN_OR_RETURN(doc.root_, u.Run(&doc.protocol_));
  return doc;
}

absl::StatusOr<PickleDocument> PickleDocument::Open(const std::string& path) {
  CACT_ASSIGN_OR_RETURN(FileBytes bytes, FileBytes::Open(path));
  return Parse(std::move(bytes));
}

}  // namespace cact
