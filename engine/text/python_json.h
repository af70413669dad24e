// JSON text exactly as Python's json.dumps(value, separators=(",", ":")) prints it, with
// ensure_ascii off (the official renderer since v2.0.12) or on (v2.0.9 and Python's default).
// nlohmann's own dump differs for floats in [1e15, 1e16) (it switches to an exponent one digit
// early), so floats are printed here with Python's repr rules; strings and integers print the
// same in both.
#pragma once
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace cact {

// Compact, key order kept, floats as Python's repr (1.0, 1e+20, 1e-05). Strings keep
// non-ASCII as UTF-8, or with `ensure_ascii` escape every character past U+007E as \uxxxx
// (lowercase hex; a surrogate pair beyond U+FFFF), as Python does.
std::string PythonJsonDumps(const nlohmann::ordered_json& value, bool ensure_ascii = false);

// The ensure_ascii=True text of JSON that was printed with ensure_ascii=False: JSON is ASCII
// outside its strings, so escaping each character past U+007E is the whole difference.
// Idempotent; a byte that starts no well-formed UTF-8 character becomes \ufffd.
std::string PythonJsonEnsureAscii(std::string_view json_text);

// A float as Python's repr(float): the shortest round-trip digits, fixed notation for
// decimal exponents in [-4, 16), else d[.ddd]e[+-]XX; integral fixed values end in ".0".
std::string PythonFloatRepr(double v);

// Parses JSON text and refuses what Python would read into something nlohmann cannot hold
// or print the same way: integers outside 64 bits (Python keeps them exact) and nesting
// deeper than `max_depth` (Python raises RecursionError near 1000); nlohmann rejects numbers
// that overflow a double (Python reads them as inf) and NaN/Infinity literals. Errors are
// InvalidArgument and say what and where (byte offset).
absl::StatusOr<nlohmann::ordered_json> ParseJsonForPython(std::string_view text,
                                                          int max_depth = 500);

}  // namespace cact
