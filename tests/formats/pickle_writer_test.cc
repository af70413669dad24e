// The pickle writer: every value kind read back by our unpickler and by Python's pickle.load
// as the same values, in the opcodes Python's own pickle.dumps(protocol=4) writes for them
// (FRAME and the memo aside), and every refusal naming the value's path.
#include "formats/pickle_writer.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "support/test_support.h"

namespace cact {
namespace {

using V = PickleValue;

using testing::Hex;

std::string FloatBits(double f) {
  uint64_t bits;
  std::memcpy(&bits, &f, 8);
  return absl::StrFormat("%016x", bits);
}

double FromBits(uint64_t bits) {
  double f;
  std::memcpy(&f, &bits, 8);
  return f;
}

// numpy's dtype.str.
std::string NumpyStr(PickleDtype t) {
  const std::string name = PickleDtypeName(t);
  const size_t size = PickleDtypeSize(t);
  const char kind = name == "bool" ? 'b' : name[0];  // float, int, uint
  return absl::StrCat(size == 1 ? "|" : "<", std::string(1, kind), size);
}

// One canonical text of a value, written alike for a PickleValue, a PickleObject and (by
// kDescribePy) a Python object: floats as their bits, text and arrays as hex.
std::string Describe(const V& v) {
  switch (v.kind) {
    case V::Kind::kNone:
      return "None";
    case V::Kind::kBool:
      return v.b ? "True" : "False";
    case V::Kind::kInt:
      return absl::StrCat("i:", v.i);
    case V::Kind::kFloat:
      return "f:" + FloatBits(v.f);
    case V::Kind::kStr:
      return "s:" + Hex(v.text);
    case V::Kind::kBytes:
      return "b:" + Hex(v.text);
    case V::Kind::kList:
    case V::Kind::kTuple: {
      std::vector<std::string> items;
      for (const V& item : v.items) items.push_back(Describe(item));
      const bool list = v.kind == V::Kind::kList;
      return absl::StrCat(list ? "[" : "(", absl::StrJoin(items, ","), list ? "]" : ")");
    }
    case V::Kind::kDict: {
      std::vector<std::string> items;
      for (const auto& [k, item] : v.entries) items.push_back("s:" + Hex(k) + ":" + Describe(item));
      return "{" + absl::StrJoin(items, ",") + "}";
    }
    case V::Kind::kArray:
      return absl::StrCat(
          "a:", NumpyStr(v.dtype), ":", absl::StrJoin(v.shape, "x"), ":C:",
          Hex(std::string_view(reinterpret_cast<const char*>(v.data.data()), v.data.size())));
  }
  return "?";
}

std::string Describe(const PickleObject& o) {
  using K = PickleObject::Kind;
  switch (o.kind) {
    case K::kNone:
      return "None";
    case K::kBool:
      return o.b ? "True" : "False";
    case K::kInt:
      return absl::StrCat("i:", o.i);
    case K::kFloat:
      return "f:" + FloatBits(o.f);
    case K::kStr:
      return "s:" + Hex(o.text);
    case K::kBytes:
      return "b:" + Hex(o.text);
    case K::kList:
    case K::kTuple: {
      std::vector<std::string> items;
      for (const PickleObject* item : o.items) items.push_back(Describe(*item));
      const bool list = o.kind == K::kList;
      return absl::StrCat(list ? "[" : "(", absl::StrJoin(items, ","), list ? "]" : ")");
    }
    case K::kDict: {
      std::vector<std::string> items;
      for (const auto& [k, item] : o.entries) items.push_back(Describe(*k) + ":" + Describe(*item));
      return "{" + absl::StrJoin(items, ",") + "}";
    }
    case K::kArray: {
      const PickleArray& a = *o.array;
      return absl::StrCat(
          "a:", NumpyStr(a.dtype), ":", absl::StrJoin(a.shape, "x"),
          a.fortran_order ? ":F:" : ":C:",
          Hex(std::string_view(reinterpret_cast<const char*>(a.data.data()), a.data.size())));
    }
    case K::kSet:
      return "set";
  }
  return "?";
}

// Python's side: argv[1] is our pickle. Prints the highest protocol its opcodes need, whether
// Python's pickle.dumps(pickle.load(...), protocol=4) writes the same opcodes once FRAME is
// dropped and every memo GET is replaced by the opcodes that built what it fetches, and the
// canonical description of the loaded value; writes Python's pickle to argv[2].
constexpr char kDescribePy[] = R"PY(
import io, pickle, pickletools, struct, sys
import numpy as np

def d(x):
    t = type(x)
    if x is None: return "None"
    if t is bool: return "True" if x else "False"
    if t is int: return "i:%d" % x
    if t is float: return "f:%016x" % struct.unpack("<Q", struct.pack("<d", x))[0]
    if t is str: return "s:" + x.encode("utf-8").hex()
    if t is bytes: return "b:" + x.hex()
    if t is list: return "[" + ",".join(map(d, x)) + "]"
    if t is tuple: return "(" + ",".join(map(d, x)) + ")"
    if t is dict: return "{" + ",".join(d(k) + ":" + d(v) for k, v in x.items()) + "}"
    if t is np.ndarray:
        return "a:%s:%s:%s:%s" % (x.dtype.str, "x".join(map(str, x.shape)),
                                  "C" if x.flags.c_contiguous else "F", x.tobytes().hex())
    raise SystemExit("unexpected type " + t.__name__)

MARK = object()
TAKES = {"TUPLE1": 1, "TUPLE2": 2, "TUPLE3": 3, "STACK_GLOBAL": 2, "REDUCE": 2, "APPEND": 1,
         "SETITEM": 2, "BUILD": 1}
TO_MARK = {"TUPLE", "APPENDS", "SETITEMS"}
INTO = {"APPEND", "APPENDS", "SETITEM", "SETITEMS", "BUILD"}  # change the object below

def ops(data):
    stack, memo = [], {}
    for op, arg, _ in pickletools.genops(data):
        n = op.name
        if n in ("PROTO", "FRAME", "STOP"): continue
        if n == "MEMOIZE": memo[len(memo)] = stack[-1]; continue
        if n.endswith("PUT"): memo[arg] = stack[-1]; continue
        if n.endswith("GET"): stack.append(memo[arg]); continue
        if n == "MARK": stack.append(MARK); continue
        if isinstance(arg, float): arg = struct.pack(">d", arg).hex()
        if isinstance(arg, str): arg = arg.replace("numpy._core", "numpy.core")
        if n in TO_MARK:
            at = max(i for i, s in enumerate(stack) if s is MARK)
            kids = stack[at + 1:]
            del stack[at:]
        else:
            c = TAKES.get(n, 0)
            kids = stack[len(stack) - c:] if c else []
            del stack[len(stack) - len(kids):]
        if n in INTO: stack[-1].extend(kids + [(n, arg)])
        else: stack.append(kids + [(n, arg)])
    assert len(stack) == 1
    out = []
    def flat(x):
        for e in x:
            if isinstance(e, list): flat(e)
            else: out.append(e)
    flat(stack[0])
    return out

data = open(sys.argv[1], "rb").read()
pickletools.dis(data, out=io.StringIO())  # checks the stack and the MARKs
print("protocol", max(op.proto for op, _, _ in pickletools.genops(data)))
value = pickle.loads(data)
again = pickle.dumps(value, protocol=4)
open(sys.argv[2], "wb").write(again)
ours, theirs = ops(data), ops(again)
if ours == theirs:
    print("ops same")
else:
    k = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    print("ops differ at %d: ours %r, python %r" % (k, ours[k:k + 3], theirs[k:k + 3]))
print("desc", d(value))
)PY";

std::vector<uint8_t> LeBytes(std::initializer_list<uint64_t> values, int size) {
  std::vector<uint8_t> out;
  for (uint64_t v : values)
    for (int k = 0; k < size; ++k) out.push_back(uint8_t(v >> (8 * k)));
  return out;
}

// Every kind, every opcode width the writer picks, both batch shapes.
V EveryKind() {
  V root = V::Dict();
  root.Set("none", V::None());
  root.Set("bools", V::List({V::Bool(true), V::Bool(false)}));
  std::vector<V> ints;
  const int64_t kInts[] = {0,
                           1,
                           255,
                           256,
                           65535,
                           65536,
                           -1,
                           -128,
                           -129,
                           -256,
                           -32768,
                           INT32_MAX,
                           INT32_MIN,
                           int64_t(INT32_MAX) + 1,
                           int64_t(INT32_MIN) - 1,
                           int64_t(UINT32_MAX),
                           int64_t(1) << 39,
                           -(int64_t(1) << 39),
                           (int64_t(1) << 40) - 1,
                           -(int64_t(1) << 55) - 1,
                           INT64_MAX,
                           INT64_MIN,
                           INT64_MIN + 1};
  for (int64_t v : kInts) ints.push_back(V::Int(v));
  root.Set("ints", V::List(std::move(ints)));
  std::vector<V> floats;
  for (double f :
       {0.0, -0.0, 1.5, -2.25, 1e308, 5e-324, DBL_MIN, 0.1, std::numeric_limits<double>::infinity(),
        -std::numeric_limits<double>::infinity(), FromBits(0x7ff8000000000000),
        FromBits(0x7ff8000000000123), FromBits(0xfff8000000000000)})
    floats.push_back(V::Float(f));
  root.Set("floats", V::List(std::move(floats)));
  root.Set("strs", V::List({V::Str(""), V::Str("a"), V::Str("caf\xC3\xA9"),
                            V::Str("\xF0\x9F\x98\x80 \xE2\x82\xAC"), V::Str(std::string("n\0l", 3)),
                            V::Str(std::string(255, 'x')), V::Str(std::string(256, 'y')),
                            V::Str(absl::StrCat(std::string(70000, 'z'), "\xC3\xA9"))}));
  root.Set("bytes", V::List({V::Bytes(""), V::Bytes(std::string("\x00\xff", 2)),
                             V::Bytes(std::string(255, '\x80')), V::Bytes(std::string(256, 'b'))}));
  root.Set("tuples",
           V::List({V::Tuple(), V::Tuple({V::Int(1)}), V::Tuple({V::Int(1), V::Str("two")}),
                    V::Tuple({V::None(), V::Bool(false), V::Float(3)}),
                    V::Tuple({V::Int(1), V::Int(2), V::Int(3), V::Tuple({V::Int(4)})})}));
  std::vector<V> many;
  for (int k = 0; k < 2500; ++k) many.push_back(V::Int(k * 37 - 9000));
  std::vector<V> one_more(1001, V::Str("r"));
  root.Set("lists", V::List({V::List(), V::List({V::Int(7)}), V::List(std::move(many)),
                             V::List(std::move(one_more))}));
  V big = V::Dict();
  for (int k = 0; k < 1001; ++k) big.Set(absl::StrCat("k", k), V::Int(k));
  V nested = V::Dict();
  nested.Set("", V::Str("empty key")).Set("\xC3\xA9", V::Dict().Set("x", V::List({V::Dict()})));
  root.Set("dicts", V::List({V::Dict(), V::Dict().Set("one", V::Int(1)), std::move(big),
                             std::move(nested)}));
  std::vector<V> arrays;
  const float f32[] = {1.5f, -0.0f, 3e38f, 1e-45f, INFINITY, NAN};
  arrays.push_back(V::Float32Array({2, 3}, f32));
  arrays.push_back(V::Array(PickleDtype::kF16, {4}, LeBytes({0x3C00, 0x8000, 0x7C00, 0x0001}, 2)));
  arrays.push_back(V::Array(PickleDtype::kF64, {}, LeBytes({0x400921FB54442D18}, 8)));  // 0-d
  arrays.push_back(V::Array(PickleDtype::kI8, {2, 1, 2, 1}, LeBytes({0x80, 0x7f, 0xff, 0}, 1)));
  arrays.push_back(V::Array(PickleDtype::kI16, {2}, LeBytes({0x8000, 0x1234}, 2)));
  arrays.push_back(V::Array(PickleDtype::kI32, {1, 2}, LeBytes({0x80000000, 7}, 4)));
  arrays.push_back(V::Array(PickleDtype::kI64, {2}, LeBytes({uint64_t(INT64_MIN), 42}, 8)));
  arrays.push_back(V::Array(PickleDtype::kU8, {0, 3}, {}));  // empty
  arrays.push_back(V::Array(PickleDtype::kU16, {1}, LeBytes({0xffff}, 2)));
  arrays.push_back(V::Array(PickleDtype::kU32, {2}, LeBytes({0xffffffff, 0}, 4)));
  arrays.push_back(V::Array(PickleDtype::kU64, {1}, LeBytes({UINT64_MAX}, 8)));
  arrays.push_back(V::Array(PickleDtype::kBool, {3}, {1, 0, 1}));
  std::vector<float> wide(300);
  for (size_t k = 0; k < wide.size(); ++k) wide[k] = float(k) * 0.25f - 7;
  arrays.push_back(V::Float32Array({3, 100}, wide));  // 1200 bytes: BINBYTES
  root.Set("arrays", V::List(std::move(arrays)));
  root.Set("none", V::Str("replaced in place"));  // an existing key keeps its position
  return root;
}

absl::StatusOr<PickleDocument> Read(const std::string& bytes) {
  return PickleDocument::Parse(
      FileBytes::FromBuffer("w.pkl", std::vector<uint8_t>(bytes.begin(), bytes.end())));
}

std::string FirstDifference(const std::string& a, const std::string& b) {
  size_t k = 0;
  while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
  return absl::StrCat("first difference at character ", k, ": '", a.substr(k, 60), "' vs '",
                      b.substr(k, 60), "'");
}

std::string Error(const V& v) {
  auto bytes = SerializePickle(v);
  return bytes.ok() ? "" : std::string(bytes.status().message());
}

TEST(PickleWriterTest, EveryKindRoundTripsThroughOurReader) {
  const V value = EveryKind();
  ASSERT_EQ(value.entries.front().first, "none");
  auto bytes = SerializePickle(value);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  ASSERT_EQ(bytes->substr(0, 2), "\x80\x04");
  auto doc = Read(*bytes);
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ(doc->protocol(), 4);
  const std::string want = Describe(value), got = Describe(doc->root());
  EXPECT_EQ(got, want) << FirstDifference(got, want);
  // Spot checks that do not go through Describe.
  const PickleObject* floats = doc->root().Find("floats");
  ASSERT_NE(floats, nullptr);
  EXPECT_TRUE(std::signbit(floats->items[1]->f));
  EXPECT_EQ(FloatBits(floats->items[11]->f), "7ff8000000000123");
  const PickleObject* arrays = doc->root().Find("arrays");
  ASSERT_NE(arrays, nullptr);
  const PickleArray& w = *arrays->items[0]->array;
  EXPECT_EQ(w.dtype, PickleDtype::kF32);
  EXPECT_EQ(w.shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_FALSE(w.fortran_order);
  float first;
  std::memcpy(&first, w.data.data(), 4);
  EXPECT_EQ(first, 1.5f);
  EXPECT_EQ(doc->root().Find("none")->text, "replaced in place");
}

TEST(PickleWriterTest, PythonLoadsTheSameValuesFromPythonsOwnOpcodes) {
  testing::TempDir dir;
  const V value = EveryKind();
  auto bytes = SerializePickle(value);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  testing::WriteAll(dir / "ours.pkl", std::vector<uint8_t>(bytes->begin(), bytes->end()));
  std::ofstream(dir / "describe.py") << kDescribePy;
  // No python, or no numpy, fails here: the exit code is not 0.
  const testing::CommandResult r =
      testing::Run(testing::Python() + " " + (dir / "describe.py") + " " + (dir / "ours.pkl") +
                   " " + (dir / "python.pkl"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::map<std::string, std::string> lines;
  std::istringstream out(r.output);
  for (std::string line; std::getline(out, line);) {
    const size_t space = line.find(' ');
    if (space != std::string::npos) lines[line.substr(0, space)] = line.substr(space + 1);
  }
  EXPECT_EQ(lines["protocol"], "4");
  EXPECT_EQ(lines["ops"], "same");
  const std::string want = Describe(value);
  EXPECT_EQ(lines["desc"], want) << FirstDifference(lines["desc"], want);
  // And our reader reads Python's pickle of the same values as ours.
  auto theirs = PickleDocument::Open(dir / "python.pkl");
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  const std::string got = Describe(theirs->root());
  EXPECT_EQ(got, want) << FirstDifference(got, want);
}

TEST(PickleWriterTest, SmallValueBytes) {
  // {"a": [1, 2.5, None, True, "é"], "t": (1,)}, as Python writes it without FRAME and memo.
  V v = V::Dict();
  v.Set("a", V::List({V::Int(1), V::Float(2.5), V::None(), V::Bool(true), V::Str("\xC3\xA9")}));
  v.Set("t", V::Tuple({V::Int(1)}));
  auto bytes = SerializePickle(v);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(Hex(*bytes),
            "8004"                // PROTO 4
            "7d28"                // EMPTY_DICT MARK
            "8c0161"              // 'a'
            "5d28"                // EMPTY_LIST MARK
            "4b01"                // 1
            "474004000000000000"  // 2.5
            "4e88"                // None True
            "8c02c3a9"            // 'é'
            "65"                  // APPENDS
            "8c0174"
            "4b01"
            "85"  // 't' (1,)
            "75"
            "2e");  // SETITEMS STOP
}

TEST(PickleWriterTest, Refusals) {
  V bad_str = V::Dict();
  bad_str.Set("cfg", V::List({V::Str("ok"), V::Str("ab\xff")}));
  EXPECT_EQ(Error(bad_str), "pickle value cfg[1]: the str is not UTF-8 at byte 2");
  // Surrogates are not UTF-8 (Python would need surrogatepass to write them).
  EXPECT_EQ(Error(V::Str("\xED\xA0\x80")),
            "pickle value (the root): the str is not UTF-8 at byte 0");
  V bad_key = V::Dict();
  bad_key.Set("outer", V::Dict().Set("k\xC3", V::None()));
  EXPECT_EQ(Error(bad_key), "pickle value outer/k\\xc3: the dict key is not UTF-8 at byte 1");
  V twice = V::Dict();
  twice.entries.emplace_back("a", V::Int(1));
  twice.entries.emplace_back("a", V::Int(2));
  EXPECT_EQ(Error(twice), "pickle value a: the dict has this key twice");
  V short_array = V::Dict();
  short_array.Set("w", V::Array(PickleDtype::kF32, {2, 3}, std::vector<uint8_t>(20)));
  EXPECT_EQ(Error(short_array),
            "pickle value w: a float32 array of shape [2, 3] needs 24 bytes, has 20");
  V overflow = V::Array(PickleDtype::kI64, {uint64_t(1) << 62, 4}, {});
  EXPECT_EQ(Error(overflow),
            "pickle value (the root): the array's shape x itemsize overflows 64 bits");
  EXPECT_EQ(Error(V::Array(PickleDtype::kU8, {uint64_t(1) << 63}, {})),
            "pickle value (the root): an array dimension is above 2^63");
}

TEST(PickleWriterTest, NestingBound) {
  auto nest = [](int depth) {
    V v = V::Int(1);
    for (int k = 0; k < depth; ++k) v = V::List({std::move(v)});
    return v;
  };
  auto ok = SerializePickle(nest(kPickleMaxWalkDepth));
  ASSERT_TRUE(ok.ok()) << ok.status();
  auto doc = Read(*ok);
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ(Describe(doc->root()), Describe(nest(kPickleMaxWalkDepth)));
  const std::string err = Error(nest(kPickleMaxWalkDepth + 1));
  EXPECT_NE(err.find("[0][0][0]"), std::string::npos) << err;
  EXPECT_NE(err.find(": nests deeper than 64 containers"), std::string::npos) << err;
}

TEST(PickleWriterTest, WritePickleIsAtomicAndReadable) {
  testing::TempDir dir;
  V v = V::Dict().Set("w", V::Float32Array({2}, std::vector<float>{1, 2}));
  ASSERT_TRUE(WritePickle(dir / "a.pkl", v).ok());
  auto doc = PickleDocument::Open(dir / "a.pkl");
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ(Describe(doc->root()), Describe(v));
  // A refused value leaves nothing behind, not even the temporary file.
  EXPECT_FALSE(WritePickle(dir / "b.pkl", V::Str("\xff")).ok());
  EXPECT_EQ(testing::Listing(dir.path()), std::vector<std::string>{"a.pkl"});
}

}  // namespace
}  // namespace cact
