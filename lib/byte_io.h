// Little-endian byte strings for small binary files of our own (the prompt cache): a
// writer that appends numbers and arrays, and a reader that checks every read against the
// bytes left and reports the field and byte offset of what does not fit.
#pragma once
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "absl/status/status.h"

namespace cact {

class ByteWriter {
 public:
  template <typename T>
  void Put(T v) {
    static_assert(std::is_arithmetic_v<T>);
    Append(&v, sizeof v);
  }
  template <typename T>
  void PutArray(std::span<const T> v) {
    static_assert(std::is_arithmetic_v<T>);
    Append(v.data(), v.size_bytes());
  }
  void PutBytes(std::string_view b) { Append(b.data(), b.size()); }
  std::string& bytes() { return out_; }
  size_t size() const { return out_.size(); }

 private:
  void Append(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string out_;
};

// Errors are DataLoss: "NAME: FIELD at offset N: WHAT" (lib/status.h FormatError), with
// offsets counted from `base` (the reader's place in its file).
class ByteReader {
 public:
  ByteReader(std::string_view bytes, std::string name, uint64_t base = 0)
      : bytes_(bytes), name_(std::move(name)), base_(base) {}

  template <typename T>
  absl::Status Get(std::string_view field, T* v) {
    static_assert(std::is_arithmetic_v<T>);
    return Copy(field, v, sizeof *v, 1);
  }
  template <typename T>
  absl::Status GetArray(std::string_view field, std::span<T> v) {
    static_assert(std::is_arithmetic_v<T>);
    return Copy(field, v.data(), sizeof(T), v.size());
  }
  // The next n bytes as a view (valid while the reader's bytes are).
  absl::Status View(std::string_view field, uint64_t n, std::string_view* v);

  // The error for a value read just now at `offset()` - `size` that is out of range.
  absl::Status Bad(std::string_view field, uint64_t offset, std::string_view what) const;
  // OK when every byte was read, else names the first byte left over.
  absl::Status ExpectEnd(std::string_view what) const;

  uint64_t offset() const { return base_ + pos_; }  // of the next byte
  uint64_t left() const { return bytes_.size() - pos_; }
  const std::string& name() const { return name_; }

 private:
  absl::Status Copy(std::string_view field, void* out, size_t elem, uint64_t count);
  std::string_view bytes_;
  std::string name_;
  uint64_t base_ = 0, pos_ = 0;
};

}  // namespace cact
