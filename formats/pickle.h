// A restricted unpickler for data pickles (protocols 0-5), in the spirit of PyTorch's
// weights_only loader: a small stack machine over the opcodes that containers, strings,
// bytes, numbers and numpy arrays use. Globals resolve only against an allow-list (numpy's
// array and dtype reconstruction helpers under their numpy 1 and numpy 2 names,
// `_codecs.encode`, `collections.OrderedDict`); every other global, and every opcode that
// builds arbitrary objects (INST, OBJ, NEWOBJ, PERSID, EXT*, out-of-band buffers), is refused
// with an error naming it and its byte offset. Nothing is ever executed.
//
// Bounded: nesting of MARKs, memo entries and stack size are capped; no allocation exceeds
// what the file carries (a length is checked against the remaining bytes before anything
// is allocated; an array's shape x itemsize must equal its byte count). Array bytes stay in
// place in the input (mmap'd) when the pickle carries them as BINBYTES / BYTEARRAY8; only
// protocol 2's latin-1 strings are decoded into owned storage.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/file_bytes.h"

namespace cact {

enum class PickleDtype : uint8_t { kF16, kF32, kF64, kI8, kI16, kI32, kI64, kU8, kU16, kU32, kU64, kBool };
// "float16", "float32", ... "bool" (numpy's names).
const char* PickleDtypeName(PickleDtype t);
size_t PickleDtypeSize(PickleDtype t);
// numpy's type code: "f4", "i8", "b1", ... (the first argument of numpy.dtype in a pickle).
const char* PickleDtypeCode(PickleDtype t);

// A numpy ndarray: little-endian elements, `data.size() == product(shape) * itemsize`.
struct PickleArray {
  PickleDtype dtype = PickleDtype::kF32;
  std::vector<uint64_t> shape;
  bool fortran_order = false;     // element (i0, i1, ...) at column-major position when true
  std::span<const uint8_t> data;  // into the input bytes, or into document-owned storage
  uint64_t NumElements() const;
};

// One Python object of the pickle. Owned by its PickleDocument; objects refer to each other
// by pointer, so a memo'd object referenced twice is one object (no copies, no blow-up), and
// a self-referencing container is harmless to memory. Code that walks a document must bound
// its own depth (see kPickleMaxWalkDepth).
struct PickleObject {
  enum class Kind : uint8_t {
    kNone, kBool, kInt, kFloat, kStr, kBytes, kList, kTuple, kDict, kSet, kArray
  };
  Kind kind = Kind::kNone;
  uint64_t offset = 0;  // byte offset of the opcode that created it
  bool b = false;
  int64_t i = 0;  // kInt (values outside int64 are refused)
  double f = 0;
  std::string_view text;  // kStr (UTF-8) and kBytes; points into input or owned storage
  std::vector<const PickleObject*> items;  // kList, kTuple, kSet
  std::vector<std::pair<const PickleObject*, const PickleObject*>> entries;  // kDict, in order
  const PickleArray* array = nullptr;  // kArray

  // kDict with a kStr key equal to `key`: its value, else nullptr.
  const PickleObject* Find(std::string_view key) const;
  // "dict", "list", "str", "ndarray", ... (Python's type names).
  const char* TypeName() const;
};

inline constexpr int kPickleMaxWalkDepth = 64;

class PickleDocument {
 public:
  // Parses `bytes` (kept alive by the document: arrays point into it). Errors name the file
  // (bytes.path()), the opcode and its offset: "NAME: pickle opcode GLOBAL at offset 1234:
  // global 'os.system' is not allowed (...)".
  static absl::StatusOr<PickleDocument> Parse(FileBytes bytes);
  static absl::StatusOr<PickleDocument> Open(const std::string& path);

  PickleDocument() = default;
  PickleDocument(PickleDocument&&) noexcept = default;
  PickleDocument& operator=(PickleDocument&&) noexcept = default;

  const PickleObject& root() const { return *root_; }
  const std::string& name() const { return bytes_.path(); }
  int protocol() const { return protocol_; }  // from PROTO; 0 when absent
  uint64_t size() const { return bytes_.size(); }

 private:
  struct Arena;
  FileBytes bytes_;
  std::shared_ptr<Arena> arena_;  // owns every object, array and decoded string
  const PickleObject* root_ = nullptr;
  int protocol_ = 0;
};

// True when `bytes` look like a pickle (PROTO 2-5 opcode, or a protocol 0/1 opening of a
// dict or list: `}`, `]`, `(d`, `(l`); used to tell a .pkl from other inputs without
// trusting the file name.
bool LooksLikePickle(std::span<const uint8_t> bytes);

}  // namespace cact
