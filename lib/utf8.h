// UTF-8 as JSON, Python and the tokenizer's decoder accept it: no overlong forms, no
// surrogates, nothing above U+10FFFF.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace cact {

// Bytes of the well-formed character starting at s[i], or 0 if there is none.
size_t Utf8CharLength(std::string_view s, size_t i);

// `s` with every byte that does not start a well-formed character replaced by U+FFFD.
std::string ReplaceBadUtf8(std::string_view s);

}  // namespace cact
