#include "lib/byte_io.h"

#include "absl/strings/str_format.h"
#include "lib/status.h"

namespace cact {

absl::Status ByteReader::Copy(std::string_view field, void* out, size_t elem, uint64_t count) {
  if (count > left() / elem)
    return Bad(field, offset(),
               absl::StrFormat("needs %d bytes, %d left (truncated?)",
                               count > UINT64_MAX / elem ? UINT64_MAX : count * elem, left()));
  if (count) std::memcpy(out, bytes_.data() + pos_, count * elem);
  pos_ += count * elem;
  return absl::OkStatus();
}

absl::Status ByteReader::View(std::string_view field, uint64_t n, std::string_view* v) {
  if (n > left())
    return Bad(field, offset(), absl::StrFormat("needs %d bytes, %d left (truncated?)", n, left()));
  *v = bytes_.substr(pos_, n);
  pos_ += n;
  return absl::OkStatus();
}

absl::Status ByteReader::Bad(std::string_view field, uint64_t offset, std::string_view what) const {
  return absl::DataLossError(FormatError(name_, field, offset, what).message());
}

absl::Status ByteReader::ExpectEnd(std::string_view what) const {
  if (left() == 0) return absl::OkStatus();
  return Bad("end", offset(), absl::StrFormat("%d bytes after %s", left(), what));
}

}  // namespace cact
