// JSON text exactly as Python's json.dumps(value, separators=(",", ":"), ensure_ascii=False)
// prints it: the official renderer's form of tools and answers. nlohmann's own dump differs
// for floats in [1e15, 1e16) (it switches to an exponent one digit early), so floats are
// printed here with Python's repr rules; strings and integers print the same in both.
#pragma once
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace cact {

// Compact, key order kept, non-ASCII kept, floats as Python's repr (1.0, 1e+20, 1e-05).
std::string PythonJsonDumps(const nlohmann::ordered_json& value);

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
