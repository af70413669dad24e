#include "formats/protobuf_wire.h"

#include "absl/strings/str_format.h"
#include "formats/le_bytes.h"
#include "lib/status.h"

namespace cact {

absl::StatusOr<uint64_t> WireReader::Varint(const char* what) {
  const size_t start = pos_;
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos_ >= bytes_.size())
      return FormatError(name_, what, base_ + start, "message ends inside a varint");
    const uint8_t b = bytes_[pos_++];
    v |= uint64_t(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
  return FormatError(name_, what, base_ + start, "varint longer than 10 bytes");
}

absl::StatusOr<WireField> WireReader::Next() {
  WireField f;
  f.offset = base_ + pos_;
  CACT_ASSIGN_OR_RETURN(uint64_t key, Varint("protobuf tag"));
  f.number = uint32_t(key >> 3);
  const uint32_t type = uint32_t(key & 7);
  const size_t left = bytes_.size() - pos_;
  switch (type) {
    case 0: {
      f.type = WireType::kVarint;
      CACT_ASSIGN_OR_RETURN(f.varint, Varint("protobuf varint"));
      break;
    }
    case 1:
      if (left < 8)
        return FormatError(name_, "protobuf fixed64", base_ + pos_,
                           "message ends inside the value");
      f.type = WireType::kFixed64;
      f.varint = LoadLE64(bytes_.data() + pos_);
      pos_ += 8;
      break;
    case 5:
      if (left < 4)
        return FormatError(name_, "protobuf fixed32", base_ + pos_,
                           "message ends inside the value");
      f.type = WireType::kFixed32;
      f.varint = LoadLE32(bytes_.data() + pos_);
      pos_ += 4;
      break;
    case 2: {
      f.type = WireType::kBytes;
      CACT_ASSIGN_OR_RETURN(uint64_t len, Varint("protobuf length"));
      if (len > bytes_.size() - pos_)
        return FormatError(
            name_, absl::StrFormat("protobuf field %d length", f.number), base_ + pos_,
            absl::StrFormat("%d bytes but only %d remain", len, bytes_.size() - pos_));
      f.bytes = bytes_.subspan(pos_, len);
      f.payload_offset = base_ + pos_;
      pos_ += len;
      break;
    }
    default:
      return FormatError(name_, absl::StrFormat("protobuf field %d", f.number), f.offset,
                         absl::StrFormat("unsupported wire type %d", type));
  }
  return f;
}

}  // namespace cact
