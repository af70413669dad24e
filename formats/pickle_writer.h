// A pickle writer for data pickles, the inverse of the restricted unpickler (pickle.h): None,
// bool, int (int64), float, str (UTF-8), bytes, list, tuple, dict (str keys, insertion order)
// and numpy arrays (little-endian, C order, the dtypes pickle.h reads).
//
// Protocol 4, Python's default since 3.8 and so what the official trainer's pickle.dump
// writes: it carries array data as raw BINBYTES (protocol 2 has no bytes opcode, so numpy
// writes it through `_codecs.encode` of a latin-1 str: ~1.5x the size for float data, and
// our reader must decode it into a copy instead of keeping it in place). Two protocol 4
// features are left out because a loader does not need them: FRAME (framing is optional;
// Python's loader reads unframed opcodes alike) and the memo (MEMOIZE / BINGET only share
// objects, and a value tree shares none). Apart from those, the opcodes are the ones
// CPython's pickle.dumps(value, protocol=4) writes, batches of 1,000 APPENDS / SETITEMS
// included (tests/formats/pickle_writer_test.cc compares them), except for the empty
// MARK SETITEMS that CPython ends a dict of a multiple of 1,000 entries with.
//
// An array is written as numpy's ndarray.__reduce_ex__(4) writes it:
//   numpy.core.multiarray._reconstruct(numpy.ndarray, (0,), b'b'), then BUILD with
//   (1, shape, dtype, False, raw bytes), where dtype = numpy.dtype('f4', False, True) with
//   BUILD (3, '<', None, None, None, -1, -1, 0) ('|' for one-byte types).
// numpy 2 still loads the numpy.core names: it keeps them for old pickles.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "formats/pickle.h"

namespace cact {

// One Python value to pickle; containers own their items.
struct PickleValue {
  enum class Kind : uint8_t {
    kNone,
    kBool,
    kInt,
    kFloat,
    kStr,
    kBytes,
    kList,
    kTuple,
    kDict,
    kArray
  };
  Kind kind = Kind::kNone;
  bool b = false;
  int64_t i = 0;
  double f = 0;                    // any bits: NaN and infinities are data too
  std::string text;                // kStr (UTF-8), kBytes
  std::vector<PickleValue> items;  // kList, kTuple
  std::vector<std::pair<std::string, PickleValue>> entries;  // kDict, in insertion order
  PickleDtype dtype = PickleDtype::kF32;                     // kArray
  std::vector<uint64_t> shape;                               // kArray; {} is 0-d
  std::vector<uint8_t> data;  // kArray: product(shape) x itemsize bytes, little-endian, C order

  static PickleValue None() { return {}; }
  static PickleValue Bool(bool v);
  static PickleValue Int(int64_t v);
  static PickleValue Float(double v);
  static PickleValue Str(std::string utf8);
  static PickleValue Bytes(std::string bytes);
  static PickleValue List(std::vector<PickleValue> items = {});
  static PickleValue Tuple(std::vector<PickleValue> items = {});
  static PickleValue Dict();
  static PickleValue Array(PickleDtype dtype, std::vector<uint64_t> shape,
                           std::vector<uint8_t> data);
  static PickleValue Float32Array(std::vector<uint64_t> shape, std::span<const float> values);

  // kDict: `key` -> `value`. A new key goes last; an existing one keeps its place and takes
  // the new value (Python's dict). Linear in the entries: for metadata-sized dicts.
  PickleValue& Set(std::string key, PickleValue value);
};

// The protocol 4 pickle of `root`. Refused, naming the value's path ("lora/<key>/A",
// "items[3]"): a str or dict key that is not UTF-8 (Python's loader refuses it too), a dict
// key twice (only reachable through `entries`), an array whose byte count is not
// product(shape) x itemsize, nesting deeper than kPickleMaxWalkDepth (readers of documents
// walk no deeper).
absl::StatusOr<std::string> SerializePickle(const PickleValue& root);

// SerializePickle written atomically (lib/atomic_file.h; a path ending in ".zst" is
// compressed, which PickleDocument::Open reads and Python's pickle.load does not).
absl::Status WritePickle(const std::string& path, const PickleValue& root);

}  // namespace cact
