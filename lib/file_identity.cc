#include "lib/file_identity.h"

#include <sys/stat.h>

#include <atomic>
#include <mutex>

#include "lib/status.h"

namespace cact {
namespace {

struct Identity {
  dev_t dev;
  ino_t ino;
  std::string path;
};

std::mutex& RegistryMutex() {
  static std::mutex m;
  return m;
}
std::vector<Identity>& Registry() {
  static std::vector<Identity> inputs;
  return inputs;
}

// The noted input that `st` is. An entry whose path no longer names that file (deleted, its
// inode number reused by a new file) is stale and matches nothing.
const Identity* FindNoted(const struct stat& st) {
  for (const Identity& id : Registry()) {
    if (id.dev != st.st_dev || id.ino != st.st_ino) continue;
    struct stat now {};
    if (::stat(id.path.c_str(), &now) == 0 && now.st_dev == id.dev && now.st_ino == id.ino)
      return &id;
  }
  return nullptr;
}

absl::Status Refuse(const std::string& output, const std::string& role, const std::string& input) {
  const std::string same = output == input ? "" : " (the same file as '" + input + "')";
  return absl::FailedPreconditionError(output + ": " + role + " is an input of this command" +
                                       same + "; refusing to replace it (write elsewhere)");
}

std::atomic<bool> recording{false};

}  // namespace

void RecordInputs(bool on) { recording = on; }

void NoteInput(const std::string& path) {
  if (!recording) return;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  std::lock_guard<std::mutex> lock(RegistryMutex());
  if (!FindNoted(st)) Registry().push_back({st.st_dev, st.st_ino, path});
}

absl::Status CheckOutputIsNotInput(const std::string& output,
                                   const std::vector<std::string>& inputs,
                                   const std::string& role) {
  if (output.empty() || output == "-") return absl::OkStatus();
  struct stat out {};
  if (::stat(output.c_str(), &out) != 0) return absl::OkStatus();  // a new file
  for (const std::string& in : inputs) {
    struct stat st {};
    if (::stat(in.c_str(), &st) == 0 && st.st_dev == out.st_dev && st.st_ino == out.st_ino)
      return Refuse(output, role, in);
  }
  std::lock_guard<std::mutex> lock(RegistryMutex());
  if (const Identity* id = FindNoted(out)) return Refuse(output, role, id->path);
  return absl::OkStatus();
}

absl::Status CheckOutputFdIsNotInput(int fd, const std::string& name) {
  struct stat out {};
  if (::fstat(fd, &out) != 0 || !S_ISREG(out.st_mode)) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(RegistryMutex());
  if (const Identity* id = FindNoted(out)) return Refuse(name, "output", id->path);
  return absl::OkStatus();
}

}  // namespace cact
