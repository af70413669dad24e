#include "engine/text/python_json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "lib/utf8.h"

namespace cact {
namespace {

using Json = nlohmann::ordered_json;

void Dump(const Json& v, bool ascii, std::string* out) {
  switch (v.type()) {
    case Json::value_t::array: {
      *out += '[';
      bool first = true;
      for (const Json& e : v) {
        if (!first) *out += ',';
        first = false;
        Dump(e, ascii, out);
      }
      *out += ']';
      return;
    }
    case Json::value_t::object: {
      *out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) *out += ',';
        first = false;
        *out += Json(it.key()).dump(-1, ' ', ascii, Json::error_handler_t::replace);
        *out += ':';
        Dump(it.value(), ascii, out);
      }
      *out += '}';
      return;
    }
    case Json::value_t::number_float:
      *out += PythonFloatRepr(v.get<double>());
      return;
    default:  // null, booleans, integers and strings print as Python prints them (nlohmann's
              // ensure_ascii escapes from U+007F on, lowercase, with surrogate pairs: as Python)
      *out += v.dump(-1, ' ', ascii, Json::error_handler_t::replace);
  }
}

// Checks what the DOM parser would accept silently (nlohmann itself rejects overflowing
// numbers); the DOM is built in a second pass.
class PythonLimits : public nlohmann::json_sax<Json> {
 public:
  explicit PythonLimits(int max_depth) : max_depth_(max_depth) {}
  std::string error;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t& text) override {
    if (text.find_first_of(".eE") == string_t::npos)
      return Fail(absl::StrCat("integer ", text.substr(0, 40), " is outside the 64-bit range"));
    return true;
  }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return Enter(); }
  bool key(string_t&) override { return true; }
  bool end_object() override { return --depth_, true; }
  bool start_array(std::size_t) override { return Enter(); }
  bool end_array() override { return --depth_, true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    return Fail(e.what());
  }

 private:
  bool Enter() {
    if (++depth_ > max_depth_) return Fail(absl::StrCat("nesting deeper than ", max_depth_));
    return true;
  }
  bool Fail(std::string what) {
    if (error.empty()) error = std::move(what);
    return false;
  }
  int max_depth_, depth_ = 0;
};

}  // namespace

std::string PythonFloatRepr(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  const std::string_view sci(buf, size_t(r.ptr - buf));  // "-d.ddde+XX"
  const size_t e = sci.find('e');
  std::string sign, digits;
  for (char c : sci.substr(0, e)) {
    if (c == '-')
      sign = "-";
    else if (c != '.')
      digits += c;
  }
  const int exp10 = std::atoi(std::string(sci.substr(e + 1)).c_str());
  const int point = exp10 + 1;  // digits are 0.DDD x 10^point
  const int n = int(digits.size());
  if (point > -4 && point <= 16) {
    if (point <= 0) return sign + "0." + std::string(size_t(-point), '0') + digits;
    if (point >= n) return sign + digits + std::string(size_t(point - n), '0') + ".0";
    return sign + digits.substr(0, size_t(point)) + "." + digits.substr(size_t(point));
  }
  std::string out = sign + digits.substr(0, 1);
  if (n > 1) out += "." + digits.substr(1);
  const int a = std::abs(exp10);
  return out + (exp10 < 0 ? "e-" : "e+") + (a < 10 ? "0" : "") + std::to_string(a);
}

std::string PythonJsonDumps(const Json& value, bool ensure_ascii) {
  std::string out;
  Dump(value, ensure_ascii, &out);
  return out;
}

std::string PythonJsonEnsureAscii(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto escape = [&out](uint32_t unit) {
    constexpr char kHex[] = "0123456789abcdef";
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(unit >> shift) & 0xF];
  };
  for (size_t i = 0; i < text.size();) {
    const uint8_t b = uint8_t(text[i]);
    if (b < 0x7F) {
      out += char(b);
      ++i;
      continue;
    }
    const size_t n = Utf8CharLength(text, i);
    if (n == 0) {
      escape(0xFFFD);
      ++i;
      continue;
    }
    uint32_t c = n == 1 ? b : b & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) c = (c << 6) | (uint8_t(text[i + k]) & 0x3F);
    if (c > 0xFFFF) {
      escape(0xD800 + ((c - 0x10000) >> 10));
      escape(0xDC00 + ((c - 0x10000) & 0x3FF));
    } else {
      escape(c);
    }
    i += n;
  }
  return out;
}

absl::StatusOr<Json> ParseJsonForPython(std::string_view text, int max_depth) {
  PythonLimits limits(max_depth);
  if (!Json::sax_parse(text.begin(), text.end(), &limits))
    return absl::InvalidArgumentError(limits.error.empty() ? "malformed JSON" : limits.error);
  return Json::parse(text.begin(), text.end());
}

}  // namespace cact
