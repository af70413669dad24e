// Error helpers: every error names the file, the field and the byte offset.
#pragma once
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"

namespace cact {

// "FILE: FIELD at offset N: WHAT" — the one shape of a format error.
absl::Status FormatError(std::string_view file, std::string_view field, uint64_t offset,
                         std::string_view what);
// "FILE: WHAT" for errors that have no byte position (I/O, arguments).
absl::Status FileError(std::string_view file, std::string_view what);

}  // namespace cact

#define CACT_STATUS_CONCAT_INNER(a, b) a##b
#define CACT_STATUS_CONCAT(a, b) CACT_STATUS_CONCAT_INNER(a, b)

#define CACT_RETURN_IF_ERROR(expr)       \
  do {                                   \
    ::absl::Status _cact_st = (expr);    \
    if (!_cact_st.ok()) return _cact_st; \
  } while (0)

#define CACT_ASSIGN_OR_RETURN(lhs, expr) \
  CACT_ASSIGN_OR_RETURN_IMPL(CACT_STATUS_CONCAT(_cact_so_, __LINE__), lhs, expr)
#define CACT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
