// Restricted unpickler over arbitrary bytes. Errors name the file; an accepted document is
// walked (depth-bounded, each object once) and every array's bytes are read, so an array
// pointing outside its storage or a shape that disagrees with its byte count shows up.
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "formats/pickle.h"
#include "fuzz_common.h"

using namespace cact;

namespace {

uint64_t Walk(const PickleObject& o, int depth, std::unordered_set<const PickleObject*>* seen) {
  if (depth > kPickleMaxWalkDepth || !seen->insert(&o).second) return 0;
  uint64_t sum = uint64_t(o.kind) + o.text.size();
  for (char c : o.text) sum += uint8_t(c);
  for (const PickleObject* item : o.items) {
    CACT_FUZZ_CHECK(item != nullptr, "container items are objects");
    sum += Walk(*item, depth + 1, seen);
  }
  for (const auto& [k, v] : o.entries) {
    CACT_FUZZ_CHECK(k && v, "dict entries are objects");
    sum += Walk(*k, depth + 1, seen) + Walk(*v, depth + 1, seen);
  }
  if (o.kind == PickleObject::Kind::kArray) {
    CACT_FUZZ_CHECK(o.array != nullptr, "an array object has its array");
    const PickleArray& a = *o.array;
    uint64_t n = 1;
    for (uint64_t d : a.shape) CACT_FUZZ_CHECK(!__builtin_mul_overflow(n, d, &n), "no overflow");
    CACT_FUZZ_CHECK(n == a.NumElements(), "element count");
    CACT_FUZZ_CHECK(n * PickleDtypeSize(a.dtype) == a.data.size(), "bytes = count x itemsize");
    for (uint8_t b : a.data) sum += b;
  }
  if (o.kind == PickleObject::Kind::kDict) (void)o.Find("key");
  return sum + std::string(o.TypeName()).size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto doc = PickleDocument::Parse(
      FileBytes::FromBuffer("fuzz.pkl", std::vector<uint8_t>(data, data + size)));
  (void)LooksLikePickle({data, size});
  if (!doc.ok()) {
    const std::string msg(doc.status().message());
    CACT_FUZZ_CHECK(msg.rfind("fuzz.pkl: ", 0) == 0, "error names the file");
    return 0;
  }
  CACT_FUZZ_CHECK(doc->protocol() >= 0 && doc->protocol() <= 5, "protocol 0-5");
  std::unordered_set<const PickleObject*> seen;
  volatile uint64_t sum = Walk(doc->root(), 0, &seen);
  (void)sum;
  return 0;
}
