#include "engine/text/tokenizer.h"

#include <algorithm>
#include <queue>

#include "absl/strings/str_format.h"

namespace cact {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";       // U+2581
constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";   // U+FFFD
constexpr std::string_view kUnknownSurface = " \xE2\x81\x87 ";  // " U+2047 "

bool IsTrail(uint8_t c) { return (c & 0xC0) == 0x80; }
bool IsValidCodepoint(uint32_t c) { return c < 0xD800 || (c >= 0xE000 && c <= 0x10FFFF); }

// Length of the valid UTF-8 character at the start of `s`, or 0 when it is malformed
// (truncated, bad continuation, overlong, surrogate, beyond U+10FFFF).
size_t ValidCharLen(std::string_view s) {
  const auto* b = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  if (b[0] < 0x80) return 1;
  if (n >= 2 && (b[0] & 0xE0) == 0xC0) {
    const uint32_t cp = ((b[0] & 0x1Fu) << 6) | (b[1] & 0x3Fu);
    if (IsTrail(b[1]) && cp >= 0x80 && IsValidCodepoint(cp)) return 2;
  } else if (n >= 3 && (b[0] & 0xF0) == 0xE0) {
    const uint32_t cp = ((b[0] & 0x0Fu) << 12) | ((b[1] & 0x3Fu) << 6) | (b[2] & 0x3Fu);
    if (IsTrail(b[1]) && IsTrail(b[2]) && cp >= 0x800 && IsValidCodepoint(cp)) return 3;
  } else if (n >= 4 && (b[0] & 0xF8) == 0xF0) {
    const uint32_t cp =
        ((b[0] & 0x07u) << 18) | ((b[1] & 0x3Fu) << 12) | ((b[2] & 0x3Fu) << 6) | (b[3] & 0x3Fu);
    if (IsTrail(b[1]) && IsTrail(b[2]) && IsTrail(b[3]) && cp >= 0x10000 && IsValidCodepoint(cp))
      return 4;
  }
  return 0;
}

// Length of one character judged by its lead byte only (the model's splitter; the
// normalized text is valid UTF-8 by then). Clipped to the remaining size.
size_t LeadByteCharLen(std::string_view s) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return std::min<size_t>(s.size(), kLen[uint8_t(s[0]) >> 4]);
}

bool ParseBytePiece(std::string_view s, uint8_t* byte) {
  if (s.size() != 6 || s.substr(0, 3) != "<0x" || s[5] != '>') return false;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const int hi = hex(s[3]), lo = hex(s[4]);
  if (hi < 0 || lo < 0) return false;
  *byte = uint8_t(hi * 16 + lo);
  return true;
}

// A piece's surface as text: U+2581 becomes a space.
void AppendUnescaped(std::string_view piece, std::string* text) {
  for (size_t i = 0; i < piece.size();) {
    if (piece.substr(i, kSpaceSymbol.size()) == kSpaceSymbol) {
      *text += ' ';
      i += kSpaceSymbol.size();
    } else {
      *text += piece[i++];
    }
  }
}

}  // namespace

absl::StatusOr<Tokenizer> Tokenizer::FromBytes(std::span<const uint8_t> raw,
                                               const std::string& file) {
  auto blob = ParseTokenizerBlob(raw, file);
  if (!blob.ok()) return blob.status();
  return FromBlob(std::move(blob).value());
}

absl::StatusOr<Tokenizer> Tokenizer::FromBlob(TokenizerBlob blob) {
  const size_t n = blob.pieces.size();
  for (uint32_t id : {blob.pad_id, blob.eos_id, blob.bos_id, blob.unk_id})
    if (id >= n)
      return absl::InvalidArgumentError(
          absl::StrFormat("tokenizer: special id %d outside the %d pieces", id, n));
  if (blob.pieces[blob.unk_id].type != PieceType::kUnknown)
    return absl::InvalidArgumentError("tokenizer: unk_id does not name an unknown piece");
  Tokenizer t;
  t.blob_ = std::move(blob);  // first: the tables view these strings
  t.byte_ids_.fill(-1);
  const TokenizerPiece* pieces = t.blob_.pieces.data();
  for (PieceSet* set : {&t.mergeable_, &t.reserved_})
    *set = PieceSet(0, SurfaceHash{pieces}, SurfaceEq{pieces});
  for (size_t i = 0; i < n; ++i) {
    const TokenizerPiece& p = t.blob_.pieces[i];
    const bool mergeable = p.type == PieceType::kNormal || p.type == PieceType::kUserDefined;
    (mergeable ? t.mergeable_ : t.reserved_).insert(int32_t(i));  // the first duplicate wins
    if (p.type == PieceType::kUserDefined && !p.surface.empty())
      t.user_defined_.push_back(p.surface);
    uint8_t b;
    if (p.type == PieceType::kByte && ParseBytePiece(p.surface, &b) && t.byte_ids_[b] < 0)
      t.byte_ids_[b] = int32_t(i);
  }
  std::sort(t.user_defined_.begin(), t.user_defined_.end(),
            [](std::string_view a, std::string_view b) { return a.size() > b.size(); });
  return t;
}

int32_t Tokenizer::PieceToId(std::string_view piece) const {
  if (auto it = reserved_.find(piece); it != reserved_.end()) return *it;
  if (auto it = mergeable_.find(piece); it != mergeable_.end()) return *it;
  return -1;
}

const std::string& Tokenizer::IdToPiece(int32_t id) const {
  static const std::string kEmpty;
  return id >= 0 && id < vocab_size() ? blob_.pieces[id].surface : kEmpty;
}

bool Tokenizer::IsControl(int32_t id) const {
  return id >= 0 && id < vocab_size() && blob_.pieces[id].type == PieceType::kControl;
}

size_t Tokenizer::MatchUserDefined(std::string_view s) const {
  for (std::string_view u : user_defined_)  // longest first
    if (s.substr(0, u.size()) == u) return u.size();
  return 0;
}

std::string Tokenizer::Normalize(std::string_view text, size_t mark,
                                 size_t* normalized_mark) const {
  std::string out;
  if (normalized_mark) *normalized_mark = mark == 0 ? 0 : std::string_view::npos;
  if (text.empty()) return out;
  out.reserve(text.size() * 3 / 2 + 3);
  auto append_escaped = [&out](std::string_view s) {
    for (char c : s) {
      if (c == ' ')
        out += kSpaceSymbol;
      else
        out += c;
    }
  };
  if (blob_.add_dummy_prefix) out += kSpaceSymbol;
  for (size_t consumed = 0; !text.empty();) {
    if (normalized_mark && consumed == mark) *normalized_mark = out.size();
    size_t len = MatchUserDefined(text);
    if (len) {
      append_escaped(text.substr(0, len));
    } else if ((len = ValidCharLen(text)) != 0) {
      append_escaped(text.substr(0, len));
    } else {
      out += kReplacementChar;
      len = 1;
    }
    text.remove_prefix(len);
    consumed += len;
    if (normalized_mark && text.empty() && consumed == mark) *normalized_mark = out.size();
  }
  return out;
}

std::vector<std::string_view> Tokenizer::Segment(std::string_view s) const {
  std::vector<Symbol> sym;
  for (size_t at = 0; at < s.size();) {
    Symbol x;
    x.begin = at;
    x.size = MatchUserDefined(s.substr(at));
    x.frozen = x.size != 0;
    if (!x.frozen) x.size = LeadByteCharLen(s.substr(at));
    x.prev = int(sym.size()) - 1;
    at += x.size;
    x.next = at < s.size() ? int(sym.size()) + 1 : -1;
    sym.push_back(x);
  }

  struct Pair {
    int left, right;
    float score;
    size_t size;
  };
  // Highest score first; on equal scores the leftmost pair.
  auto lower = [](const Pair& a, const Pair& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Pair, std::vector<Pair>, decltype(lower)> agenda(lower);
  auto maybe_add = [&](int left, int right) {
    if (left < 0 || right < 0 || sym[left].frozen || sym[right].frozen) return;
    const std::string_view key = s.substr(sym[left].begin, sym[left].size + sym[right].size);
    auto it = mergeable_.find(key);
    if (it == mergeable_.end()) return;
    agenda.push({left, right, blob_.pieces[*it].score, key.size()});
  };
  for (size_t i = 1; i < sym.size(); ++i) maybe_add(int(i) - 1, int(i));

  while (!agenda.empty()) {
    const Pair top = agenda.top();
    agenda.pop();
    Symbol& l = sym[top.left];
    Symbol& r = sym[top.right];
    // Stale entry: one side was merged away or has grown since the pair was queued.
    if (l.size == 0 || r.size == 0 || l.size + r.size != top.size) continue;
    l.size = top.size;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = top.left;
    r.size = 0;
    maybe_add(l.prev, top.left);
    maybe_add(top.left, l.next);
  }

  std::vector<std::string_view> pieces;
  for (int i = sym.empty() ? -1 : 0; i != -1; i = sym[i].next)
    pieces.push_back(s.substr(sym[i].begin, sym[i].size));
  return pieces;
}

void Tokenizer::EmitPiece(std::string_view piece, std::vector<int32_t>* ids) const {
  const int32_t id = PieceToId(piece);
  const bool unknown = id < 0 || blob_.pieces[id].type == PieceType::kUnknown;
  if (!unknown) {
    ids->push_back(id);
  } else if (blob_.byte_fallback) {
    for (char c : piece) {
      const int32_t b = byte_ids_[uint8_t(c)];
      ids->push_back(b >= 0 ? b : unk_id());
    }
  } else {
    ids->push_back(unk_id());
  }
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text) const {
  const std::string normalized = Normalize(text);
  std::vector<int32_t> ids;
  for (std::string_view piece : Segment(normalized)) EmitPiece(piece, &ids);
  return ids;
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, size_t prefix_size,
                                       std::optional<size_t>* prefix_ids) const {
  size_t mark = std::string_view::npos;
  const std::string normalized = Normalize(text, prefix_size, &mark);
  std::vector<int32_t> ids;
  prefix_ids->reset();
  for (std::string_view piece : Segment(normalized)) {
    if (size_t(piece.data() - normalized.data()) == mark) *prefix_ids = ids.size();
    EmitPiece(piece, &ids);
  }
  if (mark == normalized.size()) *prefix_ids = ids.size();
  return ids;
}

std::vector<std::string> Tokenizer::EncodeAsPieces(std::string_view text) const {
  std::vector<std::string> out;
  for (int32_t id : Encode(text)) out.push_back(IdToPiece(id));
  return out;
}

std::string Tokenizer::Decode(std::span<const int32_t> ids) const {
  std::string text;
  TokenDecoder decoder(*this);
  for (int32_t id : ids) decoder.Add(id, &text);
  decoder.Flush(&text);
  return text;
}

std::string Tokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  const TokenizerPiece& p = blob_.pieces[id];
  if (p.type == PieceType::kControl || p.type == PieceType::kUnknown) return {};
  uint8_t b;
  if (p.type == PieceType::kByte && ParseBytePiece(p.surface, &b)) return std::string(1, char(b));
  std::string text;
  AppendUnescaped(p.surface, &text);
  return text;
}

void TokenDecoder::Flush(std::string* text) {
  std::string_view b = bytes_;
  while (!b.empty()) {
    const size_t len = ValidCharLen(b);
    if (len)
      text->append(b.substr(0, len));
    else
      *text += kReplacementChar;
    b.remove_prefix(len ? len : 1);
  }
  bytes_.clear();
}

void TokenDecoder::Add(int32_t id, std::string* text) {
  if (id < 0 || id >= tok_->vocab_size()) return;
  const TokenizerPiece& p = tok_->blob().pieces[id];
  uint8_t b;
  if (p.type == PieceType::kByte && ParseBytePiece(p.surface, &b)) {
    bytes_ += char(b);
    at_start_ = false;
    return;
  }
  Flush(text);
  if (p.type == PieceType::kControl) return;
  if (p.type == PieceType::kUnknown) {
    *text += kUnknownSurface;
    at_start_ = false;
    return;
  }
  std::string_view piece = p.surface;
  if (at_start_ && tok_->blob().add_dummy_prefix &&
      piece.substr(0, kSpaceSymbol.size()) == kSpaceSymbol)
    piece.remove_prefix(kSpaceSymbol.size());
  at_start_ = false;
  AppendUnescaped(piece, text);
}

}  // namespace cact
