#include "engine/generate/prompt_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "lib/atomic_file.h"
#include "lib/byte_io.h"
#include "lib/sha256.h"
#include "lib/status.h"
#include "nlohmann/json.hpp"

namespace cact {
namespace {

constexpr size_t kChecksumAt = 12, kBodyAt = 44;
constexpr uint32_t kMaxHeaderBytes = 1 << 16;
constexpr uint64_t kMaxFileBytes = uint64_t{4} << 30;

std::span<const uint8_t> AsBytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string Short(const std::string& sha) { return sha.substr(0, 12); }

// Why a file made for `had` cannot serve `want`, or "" when it can.
std::string Mismatch(const PromptCache::Parsed& had, const PromptCacheKey& want,
                     const std::string& build) {
  const PromptCacheKey& k = had.key;
  if (k.model_sha256 != want.model_sha256)
    return absl::StrFormat("made for another model (sha256 %s..., this one %s...)",
                           Short(k.model_sha256), Short(want.model_sha256));
  if (k.path != want.path)
    return absl::StrFormat("made by the %s path, this run uses %s", k.path, want.path);
  auto sink = [](uint32_t n) {
    return n ? absl::StrFormat("sink %d", n) : std::string("the prefix pinned");
  };
  if (k.window != want.window || k.sink != want.sink)
    return absl::StrFormat("made with window %d and %s, this run uses %d and %s", k.window,
                           sink(k.sink), want.window, sink(want.sink));
  if (k.keep_hidden != want.keep_hidden)
    return absl::StrFormat("made %s the hidden states this run needs",
                           k.keep_hidden ? "with" : "without");
  if (had.state_version != kForwardStateVersion)
    return absl::StrFormat("state version %d, this build writes %d", had.state_version,
                           kForwardStateVersion);
  if (had.build != build)
    return absl::StrFormat("made by another build of cact (%s; this is %s)", had.build, build);
  return "";
}

// Into a buffer that is not zero-filled first (a cache may be tens of MB).
absl::Status ReadWhole(const std::string& path, uint64_t size, std::unique_ptr<char[]>* out,
                       uint64_t* got) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FileError(path, std::string("cannot open: ") + std::strerror(errno));
  out->reset(new char[size]);
  uint64_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, out->get() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += uint64_t(n);
  }
  ::close(fd);
  *got = done;  // a file that shrank while read is then truncated: rebuilt
  return absl::OkStatus();
}

}  // namespace

std::string PromptCache::Serialize(const PromptCacheKey& key, const std::string& build,
                                   const std::list<Entry>& entries) {
  const nlohmann::ordered_json header = {{"model_sha256", key.model_sha256},
                                         {"path", key.path},
                                         {"window", key.window},
                                         {"sink", key.sink},
                                         {"keep_hidden", key.keep_hidden},
                                         {"state_version", kForwardStateVersion},
                                         {"build", build}};
  const std::string text = header.dump();
  ByteWriter body;
  body.Put(uint32_t(text.size()));
  body.PutBytes(text);
  body.Put(uint32_t(entries.size()));
  for (const Entry& e : entries) {
    body.Put(uint32_t(e.ids.size()));
    body.PutArray(std::span<const int32_t>(e.ids));
    body.Put(uint64_t(e.state.size()));
    body.PutBytes(e.state);
  }
  ByteWriter file;
  file.PutBytes(kMagic);
  file.Put(kFormatVersion);
  const std::array<uint8_t, 32> sum = Sha256Digest(AsBytes(body.bytes()));
  file.PutArray(std::span<const uint8_t>(sum));
  file.PutBytes(body.bytes());
  return std::move(file.bytes());
}

absl::StatusOr<PromptCache::Parsed> PromptCache::Parse(std::string_view bytes,
                                                       const std::string& name) {
  if (bytes.size() < kMagic.size() || bytes.substr(0, kMagic.size()) != kMagic)
    return absl::InvalidArgumentError(
        name +
        ": not a cact prompt cache (it does not start with \"CACTPCF\\n\"); give "
        "--prompt-cache a new file name");
  ByteReader r(bytes, name);
  std::string_view skip;
  CACT_RETURN_IF_ERROR(r.View("magic", kMagic.size(), &skip));
  uint32_t version = 0;
  CACT_RETURN_IF_ERROR(r.Get("format version", &version));
  if (version != kFormatVersion)
    return r.Bad("format version", kMagic.size(),
                 absl::StrFormat("%d, this build reads %d", version, kFormatVersion));
  std::array<uint8_t, 32> sum{};
  CACT_RETURN_IF_ERROR(r.GetArray("checksum", std::span<uint8_t>(sum)));
  if (Sha256Digest(AsBytes(bytes.substr(kBodyAt))) != sum)
    return r.Bad("checksum", kChecksumAt,
                 "the SHA-256 of the bytes after it does not match (damaged or truncated)");

  Parsed p;
  const uint64_t header_at = r.offset();
  uint32_t header_len = 0;
  CACT_RETURN_IF_ERROR(r.Get("header length", &header_len));
  if (header_len > kMaxHeaderBytes)
    return r.Bad("header length", header_at,
                 absl::StrFormat("%d bytes, more than %d", header_len, kMaxHeaderBytes));
  std::string_view text;
  CACT_RETURN_IF_ERROR(r.View("header", header_len, &text));
  const nlohmann::json h = nlohmann::json::parse(text, nullptr, false);
  auto field = [&](const char* key, nlohmann::json::value_t type) {
    return h.is_object() && h.contains(key) && h[key].type() == type;
  };
  using V = nlohmann::json::value_t;
  if (!field("model_sha256", V::string) || !field("path", V::string) ||
      !field("window", V::number_unsigned) || !field("sink", V::number_unsigned) ||
      !field("keep_hidden", V::boolean) || !field("state_version", V::number_unsigned) ||
      !field("build", V::string) || h["window"].get<uint64_t>() > UINT32_MAX ||
      h["sink"].get<uint64_t>() > UINT32_MAX || h["state_version"].get<uint64_t>() > UINT32_MAX)
    return r.Bad("header", header_at + 4,
                 "not a JSON object with model_sha256, path, window, sink, keep_hidden, "
                 "state_version and build");
  p.key.model_sha256 = h["model_sha256"].get<std::string>();
  p.key.path = h["path"].get<std::string>();
  p.key.window = h["window"].get<uint32_t>();
  p.key.sink = h["sink"].get<uint32_t>();
  p.key.keep_hidden = h["keep_hidden"].get<bool>();
  p.state_version = h["state_version"].get<uint32_t>();
  p.build = h["build"].get<std::string>();

  const uint64_t count_at = r.offset();
  uint32_t count = 0;
  CACT_RETURN_IF_ERROR(r.Get("entry count", &count));
  if (count > kMaxEntries)
    return r.Bad("entry count", count_at, absl::StrFormat("%d, at most %d", count, kMaxEntries));
  for (uint32_t e = 0; e < count; ++e) {
    uint32_t n = 0;
    CACT_RETURN_IF_ERROR(r.Get("prefix length", &n));
    std::vector<int32_t> ids;
    if (n > r.left() / 4)
      return r.Bad("prefix ids", r.offset(), absl::StrFormat("%d ids do not fit", n));
    ids.resize(n);
    CACT_RETURN_IF_ERROR(r.GetArray("prefix ids", std::span<int32_t>(ids)));
    uint64_t size = 0;
    CACT_RETURN_IF_ERROR(r.Get("state length", &size));
    std::string_view state;
    CACT_RETURN_IF_ERROR(r.View("state", size, &state));
    p.entries.push_back({std::move(ids), state});
  }
  CACT_RETURN_IF_ERROR(r.ExpectEnd("the last entry"));
  return p;
}

absl::Status PromptCache::Load(const PromptCacheKey& key) {
  if (loaded_ && key == key_) return absl::OkStatus();
  // Stays false after an error: Store never writes over a file this could not read.
  loaded_ = false;
  key_ = key;
  entries_.clear();
  rebuild_reason_.clear();
  file_bytes_ = 0;
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    if (errno != ENOENT)
      return FileError(path_, std::string("--prompt-cache: ") + std::strerror(errno));
    loaded_ = true;
    return absl::OkStatus();
  }
  if (!S_ISREG(st.st_mode)) return FileError(path_, "--prompt-cache is not a regular file");
  if (uint64_t(st.st_size) > kMaxFileBytes)
    return FileError(path_, absl::StrFormat("%d bytes: too large for a prompt cache; give "
                                            "--prompt-cache a new file name",
                                            st.st_size));
  loaded_ = true;
  if (st.st_size == 0) return absl::OkStatus();
  if (absl::Status read = ReadWhole(path_, uint64_t(st.st_size), &file_, &file_bytes_);
      !read.ok()) {
    loaded_ = false;
    return read;
  }
  absl::StatusOr<Parsed> parsed = Parse(std::string_view(file_.get(), file_bytes_), path_);
  if (!parsed.ok()) {
    if (absl::IsInvalidArgument(parsed.status())) {
      loaded_ = false;
      return parsed.status();
    }
    rebuild_reason_ = std::string(parsed.status().message());
    return absl::OkStatus();
  }
  rebuild_reason_ = Mismatch(*parsed, key, build_);
  if (rebuild_reason_.empty()) entries_ = std::move(parsed->entries);
  return absl::OkStatus();
}

const std::string_view* PromptCache::Find(std::span<const int32_t> prefix) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (!std::equal(it->ids.begin(), it->ids.end(), prefix.begin(), prefix.end())) continue;
    entries_.splice(entries_.begin(), entries_, it);
    return &entries_.front().state;
  }
  return nullptr;
}

void PromptCache::Distrust(std::string reason) {
  entries_.clear();
  rebuild_reason_ = std::move(reason);
}

absl::Status PromptCache::Store(std::span<const int32_t> prefix, std::string state) {
  if (!loaded_) return absl::FailedPreconditionError("PromptCache::Store before Load");
  std::erase_if(entries_, [&](const Entry& e) {
    return std::equal(e.ids.begin(), e.ids.end(), prefix.begin(), prefix.end());
  });
  stored_.push_back(std::move(state));
  entries_.push_front({std::vector<int32_t>(prefix.begin(), prefix.end()), stored_.back()});
  if (entries_.size() > kMaxEntries) entries_.pop_back();
  const std::string bytes = Serialize(key_, build_, entries_);
  CACT_ASSIGN_OR_RETURN(AtomicFileWriter w, AtomicFileWriter::Create(path_));
  CACT_RETURN_IF_ERROR(w.Write(AsBytes(bytes)));
  CACT_RETURN_IF_ERROR(w.Commit());
  file_bytes_ = bytes.size();
  return absl::OkStatus();
}

}  // namespace cact
