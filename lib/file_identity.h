// Outputs never replace inputs. Every file a command reads is recorded here (FileBytes::Open
// does it; other readers call NoteInput; the tools turn recording on), and every output
// (AtomicFileWriter) is checked against the record: an output that is an input under another name (a hard link, a symbolic
// link, `./x` for `x`) is refused. Tools also check their paths before any work with
// CheckOutputIsNotInput, so a refused command has not spent its time first.
#pragma once
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace cact {

// Whether this process records its inputs (off by default: a library user may well read a
// file and write it back; the tools turn it on, tools/common/cli.h).
void RecordInputs(bool on);
// Records `path` (after symbolic links) as an input of this process when recording is on; a
// path that does not exist is ignored.
void NoteInput(const std::string& path);

// FailedPrecondition naming `output` when it is the same file as any of `inputs` (each
// existing one compared by device and inode, after symbolic links), or as any input noted
// so far. A missing output, or "-", is fine. `role` names the flag ("-o", "--logits").
absl::Status CheckOutputIsNotInput(const std::string& output,
                                   const std::vector<std::string>& inputs = {},
                                   const std::string& role = "output");

// The same for an output already open as `fd` (standard output).
absl::Status CheckOutputFdIsNotInput(int fd, const std::string& name);

}  // namespace cact
