#include "tools/cact-inspect/commands.h"
#include "tools/common/exit_code.h"

namespace cact::inspect {

int Fail(const absl::Status& status) {
  tools::PrintFailure("cact-inspect", status);
  return tools::kExitBadInput;
}

}  // namespace cact::inspect
