// The restricted unpickler: hand-assembled opcodes of every family, refusals naming opcode,
// global and offset, limits; pickles written by Python/numpy (protocols 0-5, numpy 1 and 2
// names) decoded bit for bit; hostile pickles refused without anything running.
#include "formats/pickle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "support/test_support.h"

namespace cact {
namespace {

using Kind = PickleObject::Kind;
using testing::Hex;

absl::StatusOr<PickleDocument> Parse(const std::string& bytes) {
  return PickleDocument::Parse(
      FileBytes::FromBuffer("t.pkl", std::vector<uint8_t>(bytes.begin(), bytes.end())));
}

std::string Error(const std::string& bytes) {
  auto doc = Parse(bytes);
  return doc.ok() ? "" : std::string(doc.status().message());
}

// "\x80\x04" + body + ".".
std::string P4(const std::string& body) { return std::string("\x80\x04", 2) + body + "."; }

std::string Le(uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += char(v >> (8 * i));
  return s;
}

// Protocol 2 array: _reconstruct(ndarray, (0,), b'b') then BUILD (1, shape, dtype, False, data).
std::string ArrayOps(const std::string& dtype, const std::string& order,
                     const std::string& shape_ops, const std::string& data_ops,
                     const std::string& dtype_fields = "NNN") {
  const std::string dt = "cnumpy\ndtype\n\x8c" + std::string(1, char(dtype.size())) + dtype +
                         "\x89\x88\x87R(K\x03\x8c\x01" + order + dtype_fields + "J" +
                         Le(0xFFFFFFFF, 4) + "J" + Le(0xFFFFFFFF, 4) + "K" + std::string(1, '\0') +
                         "tb";
  return "cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK" + std::string(1, '\0') +
         "\x85" + "C\x01" + "b\x87R(K\x01" + shape_ops + dt + "\x89" + data_ops + "tb";
}

TEST(PickleTest, Integers) {
  auto doc = Parse(P4("(K\x07M" + Le(0x1234, 2) + "J" + Le(uint32_t(-5), 4) + "\x8a\x08" +
                      Le(uint64_t(INT64_MIN), 8) + "\x8a\x09" + Le(uint64_t(INT64_MAX), 8) +
                      std::string(1, '\0') + "\x8a" + std::string(1, '\0') + "\x8a\x01\xff" +
                      "I42\nI00\nI01\nL-5L\n\x88\x89l"));
  ASSERT_TRUE(doc.ok()) << doc.status();
  const auto& items = doc->root().items;
  ASSERT_EQ(items.size(), 13u);
  const int64_t want[] = {7, 0x1234, -5, INT64_MIN, INT64_MAX, 0, -1, 42};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(items[i]->kind, Kind::kInt) << i;
    EXPECT_EQ(items[i]->i, want[i]) << i;
  }
  EXPECT_EQ(items[8]->kind, Kind::kBool);
  EXPECT_FALSE(items[8]->b);
  EXPECT_TRUE(items[9]->b);
  EXPECT_EQ(items[10]->i, -5);
  EXPECT_TRUE(items[11]->b);
  EXPECT_FALSE(items[12]->b);
  EXPECT_EQ(doc->protocol(), 4);
}

TEST(PickleTest, IntegersOutsideInt64AreRefused) {
  EXPECT_NE(Error(P4("\x8a\x09" + Le(0, 8) + "\x01")).find("outside int64"), std::string::npos);
  EXPECT_NE(Error(P4("\x8a\x09" + Le(uint64_t(INT64_MIN), 8) + std::string(1, '\0')))
                .find("pickle opcode LONG1 at offset 2: integer outside int64"),
            std::string::npos);
  EXPECT_NE(Error(P4("I99999999999999999999\n")).find("outside int64"), std::string::npos);
  EXPECT_NE(Error(P4("\x8b" + Le(0xFFFFFFFF, 4))).find("LONG4 at offset 2: negative length"),
            std::string::npos);
  EXPECT_NE(Error(P4("Ix1\n")).find("not a decimal integer"), std::string::npos);
}

TEST(PickleTest, Floats) {
  auto doc = Parse(P4(std::string("(G\x3f\xf8", 4) + std::string(6, '\0') + "F-2.5e3\nFinf\nt"));
  ASSERT_TRUE(doc.ok()) << doc.status();
  ASSERT_EQ(doc->root().kind, Kind::kTuple);
  EXPECT_EQ(doc->root().items[0]->f, 1.5);
  EXPECT_EQ(doc->root().items[1]->f, -2500.0);
  EXPECT_TRUE(std::isinf(doc->root().items[2]->f));
  EXPECT_NE(Error(P4("F1.5x\n")).find("FLOAT at offset 2: '1.5x' is not a float"),
            std::string::npos);
}

TEST(PickleTest, StringsAndBytes) {
  const std::string body = "(\x8c\x02hiX" + Le(2, 4) + "\xc3\xa9" + "\x8d" + Le(1, 8) + "z" +
                           "V\\u00e9\\U0001f600\xff\n" + "S'a\\x41\\n\\'\"'\n" + "U\x01\xfe" + "T" +
                           Le(3, 4) + "abc" + std::string("C\x03\x00\x01\x02", 5) + "B" + Le(1, 4) +
                           "q" + "\x8e" + Le(1, 8) + "r" + "\x96" + Le(2, 8) + "yz" + "l";
  const std::string input = P4(body);
  auto doc = Parse(input);
  ASSERT_TRUE(doc.ok()) << doc.status();
  const auto& it = doc->root().items;
  ASSERT_EQ(it.size(), 11u);
  EXPECT_EQ(it[0]->text, "hi");
  EXPECT_EQ(it[1]->text, "\xc3\xa9");
  EXPECT_EQ(it[2]->text, "z");
  EXPECT_EQ(it[3]->text, "\xc3\xa9\xf0\x9f\x98\x80\xc3\xbf");  // raw-unicode-escape
  EXPECT_EQ(it[4]->kind, Kind::kStr);
  EXPECT_EQ(it[4]->text, "aA\n'\"");
  EXPECT_EQ(it[5]->kind, Kind::kBytes);  // Python 2 str that is not ASCII
  EXPECT_EQ(it[6]->kind, Kind::kStr);
  EXPECT_EQ(it[7]->kind, Kind::kBytes);
  EXPECT_EQ(it[7]->text, std::string("\x00\x01\x02", 3));
  EXPECT_EQ(it[8]->text, "q");
  EXPECT_EQ(it[9]->text, "r");
  EXPECT_EQ(it[10]->text, "yz");
  EXPECT_NE(Error(P4("X" + Le(2, 4) + "\xc3\x28"))
                .find("BINUNICODE at offset 2: "
                      "string is not valid UTF-8"),
            std::string::npos);
  EXPECT_NE(Error(P4("S'abc\n")).find("STRING at offset 2: the argument is not quoted"),
            std::string::npos);
}

TEST(PickleTest, BytesPointIntoTheInput) {
  auto bytes = FileBytes::FromBuffer("t.pkl", {0x80, 0x04, 'C', 2, 'a', 'b', '.'});
  const uint8_t* begin = bytes.data();
  auto doc = PickleDocument::Parse(std::move(bytes));
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(doc->root().text.data()), begin + 4);
}

TEST(PickleTest, Containers) {
  // {'a': [1, 2, 3], 'b': (), 'c': (1,), 'd': (1, 2), 'e': (1, 2, 3), 'f': {1, 2}, 'g': frozenset}
  auto doc =
      Parse(P4("}(\x8c\x01"
               "a](K\x01K\x02"
               "eK\x03"
               "a\x8c\x01"
               "b)\x8c\x01"
               "cK\x01\x85"
               "\x8c\x01"
               "dK\x01K\x02\x86\x8c\x01"
               "eK\x01K\x02K\x03\x87\x8c\x01"
               "f\x8f(K\x01K\x02K\x01\x90\x8c\x01"
               "g(K\x05\x91u"));
  ASSERT_TRUE(doc.ok()) << doc.status();
  const PickleObject& r = doc->root();
  ASSERT_EQ(r.kind, Kind::kDict);
  ASSERT_EQ(r.entries.size(), 7u);
  EXPECT_EQ(r.Find("a")->items.size(), 3u);
  EXPECT_EQ(r.Find("a")->items[2]->i, 3);
  EXPECT_EQ(r.Find("b")->kind, Kind::kTuple);
  EXPECT_EQ(r.Find("c")->items.size(), 1u);
  EXPECT_EQ(r.Find("d")->items.size(), 2u);
  EXPECT_EQ(r.Find("e")->items[2]->i, 3);
  EXPECT_EQ(r.Find("f")->kind, Kind::kSet);
  EXPECT_EQ(r.Find("f")->items.size(), 2u);  // the duplicate 1 is one member
  EXPECT_EQ(r.Find("g")->items.size(), 1u);
  EXPECT_EQ(r.Find("nope"), nullptr);
  EXPECT_STREQ(r.TypeName(), "dict");

  // Protocol 0 forms: DICT, LIST, TUPLE from a MARK.
  auto p0 = Parse("(S'k'\n(I1\nI2\nlS'j'\n(I3\ntd.");
  ASSERT_TRUE(p0.ok()) << p0.status();
  EXPECT_EQ(p0->root().Find("k")->items.size(), 2u);
  EXPECT_EQ(p0->root().Find("j")->kind, Kind::kTuple);
  EXPECT_EQ(p0->protocol(), 0);
}

TEST(PickleTest, DuplicateKeysLaterWinsInPlace) {
  // {'a': 1, 'b': 2, 'a': 3, 1: 4, True: 5, 1.0: 6, (1, 'x'): 7, (1, 'x'): 8}
  auto doc =
      Parse(P4("}(\x8c\x01"
               "aK\x01\x8c\x01"
               "bK\x02\x8c\x01"
               "aK\x03K\x01K\x04\x88K\x05"
               "G\x3f\xf0" +
               std::string(6, '\0') +
               "K\x06K\x01\x8c\x01x\x86K\x07K\x01"
               "\x8c\x01x\x86K\x08u"));
  ASSERT_TRUE(doc.ok()) << doc.status();
  const auto& e = doc->root().entries;
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0].first->text, "a");
  EXPECT_EQ(e[0].second->i, 3);
  EXPECT_EQ(e[1].second->i, 2);
  EXPECT_EQ(e[2].first->kind, Kind::kInt);  // the first key object stays, as in Python
  EXPECT_EQ(e[2].second->i, 6);
  EXPECT_EQ(e[3].second->i, 8);
  EXPECT_EQ(doc->root().Find("a")->i, 3);
  // Unhashable keys are refused.
  EXPECT_NE(Error(P4("}]K\x01s")).find("SETITEM at offset 6: a list is not a supported dict key"),
            std::string::npos);
}

TEST(PickleTest, MemoSharesOneObject) {
  // [x, x, x, x] with x = [] stored by MEMOIZE, BINPUT, LONG_BINPUT and PUT.
  auto doc = Parse(P4("(]\x94q\x05r" + Le(70000, 4) + "p123\nh" + std::string(1, '\0') + "h\x05j" +
                      Le(70000, 4) + "g123\nl"));
  ASSERT_TRUE(doc.ok()) << doc.status();
  const auto& it = doc->root().items;
  ASSERT_EQ(it.size(), 5u);
  for (int k = 1; k < 5; ++k) EXPECT_EQ(it[k], it[0]) << k;
  EXPECT_NE(Error(P4("h\x07")).find("BINGET at offset 2: memo key 7 was never stored"),
            std::string::npos);
  // A list holding itself is harmless.
  auto self = Parse(P4("]\x94h" + std::string(1, '\0') + "a"));
  ASSERT_TRUE(self.ok()) << self.status();
  EXPECT_EQ(self->root().items[0], &self->root());
}

TEST(PickleTest, StackOpcodes) {
  auto doc =
      Parse(P4("K\x01"
               "2\x86K\x09"
               "0(K\x07K\x08"
               "1(K\x07"
               "0"
               "1"));
  ASSERT_TRUE(doc.ok()) << doc.status();
  ASSERT_EQ(doc->root().kind, Kind::kTuple);
  EXPECT_EQ(doc->root().items[0], doc->root().items[1]);
  EXPECT_NE(Error(P4("K\x01K\x02")).find("STOP at offset 6: STOP leaves 2 objects"),
            std::string::npos);
  EXPECT_NE(Error(P4("(K\x01")).find("STOP at offset 5: MARK left open"), std::string::npos);
  EXPECT_NE(Error(P4("a")).find("APPEND at offset 2: stack underflow"), std::string::npos);
  EXPECT_NE(Error(P4("](a")).find("APPEND at offset 4: stack underflow"), std::string::npos);
  EXPECT_NE(Error(P4("K\x01t")).find("TUPLE at offset 4: no MARK"), std::string::npos);
  EXPECT_NE(Error(P4("")).find("STOP at offset 2: STOP leaves 0 objects"), std::string::npos);
  EXPECT_NE(Error(std::string("\x80\x04N", 3)).find("t.pkl: pickle at offset 3: truncated"),
            std::string::npos);
  EXPECT_NE(Error(std::string("\x80\x06N.", 4)).find("PROTO at offset 0: protocol 6"),
            std::string::npos);
  EXPECT_NE(Error(P4("K\x01"
                     "b"))
                .find("BUILD at offset 4: stack underflow"),
            std::string::npos);
  EXPECT_NE(Error(P4("]K\x01"
                     "b"))
                .find("BUILD at offset 5: sets the state of a list"),
            std::string::npos);
}

TEST(PickleTest, RefusedOpcodesNameThemselvesAndTheirOffset) {
  const std::pair<uint8_t, const char*> refused[] = {
      {'i', "INST"},   {'o', "OBJ"},          {0x81, "NEWOBJ"},         {0x92, "NEWOBJ_EX"},
      {'P', "PERSID"}, {'Q', "BINPERSID"},    {0x82, "EXT1"},           {0x83, "EXT2"},
      {0x84, "EXT4"},  {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"}};
  for (const auto& [op, name] : refused) {
    const std::string e = Error(P4("N(" + std::string(1, char(op)) + "xx\nyy\n"));
    EXPECT_NE(e.find(std::string("t.pkl: pickle opcode ") + name + " at offset 4: not allowed"),
              std::string::npos)
        << name << ": " << e;
  }
  for (int op : {0xff, 0x99, int('z'), int('A'), 0x00}) {
    std::string body = "N";
    body.push_back(char(op));
    const std::string e = Error(P4(body));
    EXPECT_NE(e.find(absl::StrFormat("pickle opcode 0x%02x at offset 3: unknown opcode", op)),
              std::string::npos)
        << e;
  }
}

TEST(PickleTest, GlobalsOutsideTheAllowListAreRefused) {
  EXPECT_EQ(Error(P4("N0cos\nsystem\n")),
            "t.pkl: pickle opcode GLOBAL at offset 4: global 'os.system' is not allowed (only "
            "numpy array reconstruction, _codecs.encode and OrderedDict are)");
  EXPECT_NE(Error(P4("\x8c\x08"
                     "builtins\x8c\x04"
                     "eval\x93"))
                .find("STACK_GLOBAL at offset 18: global 'builtins.eval' is not allowed"),
            std::string::npos);
  EXPECT_NE(Error(P4("cnumpy\nload\n")).find("global 'numpy.load' is not allowed"),
            std::string::npos);
  EXPECT_NE(Error(P4("cnumpy.core.multiarray\n_reconstruct\nK\x01\x85R"))
                .find("REDUCE at offset 41: numpy _reconstruct takes 3 arguments"),
            std::string::npos);
  // An allowed class object as data is refused, as is calling something that is not a global.
  EXPECT_NE(Error(P4("]ccollections\nOrderedDict\na")).find("APPEND at offset 28: a numpy dtype"),
            std::string::npos);
  EXPECT_NE(Error(P4("cnumpy\ndtype\n")).find("STOP"), std::string::npos);
  EXPECT_NE(Error(P4("K\x01)R")).find("REDUCE at offset 5: calls a int"), std::string::npos);
  // OrderedDict() and OrderedDict([pairs]).
  auto od =
      Parse(P4("ccollections\nOrderedDict\n)R(\x8c\x01kK\x01uccollections\nOrderedDict\n"
               "](\x8c\x01xK\x02\x86\x8c\x01yK\x03\x86"
               "e\x85R\x86"));
  ASSERT_TRUE(od.ok()) << od.status();
  EXPECT_EQ(od->root().items[0]->Find("k")->i, 1);
  EXPECT_EQ(od->root().items[1]->Find("y")->i, 3);
}

TEST(PickleTest, ArraysBuiltByHand) {
  const std::string data = "C\x08" + Le(0x3f800000, 4) + Le(0x40000000, 4);
  auto doc = Parse(P4(ArrayOps("f4", "<", "K\x02\x85", data)));
  ASSERT_TRUE(doc.ok()) << doc.status();
  ASSERT_EQ(doc->root().kind, Kind::kArray);
  const PickleArray& a = *doc->root().array;
  EXPECT_EQ(a.dtype, PickleDtype::kF32);
  EXPECT_EQ(a.shape, std::vector<uint64_t>{2});
  EXPECT_EQ(a.NumElements(), 2u);
  EXPECT_STREQ(doc->root().TypeName(), "ndarray");
  float f[2];
  std::memcpy(f, a.data.data(), 8);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], 2.0f);
  // 0-d array: empty shape, one element.
  auto zero_d = Parse(P4(ArrayOps("i8", "<", ")", "C\x08" + Le(uint64_t(-3), 8))));
  ASSERT_TRUE(zero_d.ok()) << zero_d.status();
  EXPECT_TRUE(zero_d->root().array->shape.empty());
  EXPECT_EQ(zero_d->root().array->NumElements(), 1u);
  EXPECT_EQ(zero_d->root().array->dtype, PickleDtype::kI64);
}

TEST(PickleTest, ArrayRefusals) {
  const std::string data = "C\x08" + Le(0x3f800000, 4) + Le(0x40000000, 4);
  const std::string lying = P4(ArrayOps("f4", "<", "K\x03\x85", data));
  EXPECT_EQ(Error(lying), absl::StrFormat("t.pkl: pickle opcode BUILD at offset %d: array of shape "
                                          "x itemsize 12 bytes carries 8 bytes",
                                          lying.size() - 2));
  EXPECT_NE(Error(P4(ArrayOps("f4", ">", "K\x02\x85", data)))
                .find("numpy.dtype: big-endian arrays are not supported"),
            std::string::npos);
  EXPECT_NE(Error(P4(ArrayOps(">f4", "<", "K\x02\x85", data))).find("big-endian dtype"),
            std::string::npos);
  EXPECT_NE(Error(P4(ArrayOps("f4", "<", "K\x02\x85", data, "NN}")))
                .find("structured and subarray dtypes are not supported"),
            std::string::npos);
  EXPECT_NE(Error(P4(ArrayOps("O8", "|", "K\x02\x85", data))).find("object arrays"),
            std::string::npos);
  EXPECT_NE(Error(P4(ArrayOps("c8", "<", "K\x02\x85", data))).find("'c8' is not supported"),
            std::string::npos);
  EXPECT_NE(Error(P4(ArrayOps("f4", "<", "K\x02\x85", "]"))).find("object arrays are refused"),
            std::string::npos);
  const std::string huge = "\x8a\x08" + Le(uint64_t(1) << 62, 8);
  EXPECT_NE(Error(P4(ArrayOps("f4", "<", huge + huge + "\x86", data))).find("overflows 64 bits"),
            std::string::npos);
  EXPECT_NE(Error(P4(ArrayOps("f4", "<", "J" + Le(uint32_t(-1), 4) + "\x85", data)))
                .find("non-negative int"),
            std::string::npos);
}

TEST(PickleTest, LimitsAreEnforcedWithoutAllocating) {
  EXPECT_NE(Error(P4(std::string(10001, '('))).find("MARK at offset 10002: more than 10000"),
            std::string::npos);
  // 10000 MARKs are fine: 10000 nested tuples.
  EXPECT_EQ(Error(P4(std::string(10000, '(') + "N" + std::string(10000, 't'))), "");
  EXPECT_NE(Error(P4("\x8e" + Le(uint64_t(1) << 60, 8)))
                .find("BINBYTES8 at offset 2: truncated: needs 1152921504606846976 bytes"),
            std::string::npos);
  EXPECT_NE(Error(P4("X" + Le(0xFFFFFFFF, 4))).find("truncated"), std::string::npos);
  EXPECT_NE(Error(P4("\x95" + Le(~uint64_t{0}, 8))).find("FRAME at offset 2: truncated"),
            std::string::npos);
  EXPECT_NE(Error(P4("T" + Le(0x80000000, 4))).find("negative length"), std::string::npos);
  std::string memo = "N" + std::string(1000001, '\x94');
  EXPECT_NE(Error(P4(memo)).find("MEMOIZE at offset 1000003: more than 1000000 memo entries"),
            std::string::npos);
  // Tuples nested deeper than the walk depth do not make a dict key.
  std::string deep = "}K\x01";
  for (int i = 0; i < 100; ++i) deep += "\x85";
  EXPECT_NE(Error(P4(deep + "K\x01s")).find("nests tuples too deeply"), std::string::npos);
}

TEST(PickleTest, EveryTruncationOfAHandPickleFails) {
  const std::string full =
      P4("}(\x8c\x01"
         "a" +
         ArrayOps("f4", "<", "K\x01\x85", "C\x04" + Le(0x3f800000, 4)) +
         "\x8c\x01"
         "bX" +
         Le(1, 4) + "cu");
  ASSERT_EQ(Error(full), "");
  for (size_t n = 0; n < full.size(); ++n)
    EXPECT_NE(Error(full.substr(0, n)), "") << "prefix " << n;
}

TEST(PickleTest, LooksLikePickle) {
  auto looks = [](const std::string& s) {
    return LooksLikePickle({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
  };
  EXPECT_TRUE(looks("\x80\x02}q"));
  EXPECT_TRUE(looks("\x80\x05\x95"));
  EXPECT_TRUE(looks("(dp0\n"));
  EXPECT_TRUE(looks("}q\x00"));
  EXPECT_FALSE(looks("\x80\x06"));
  EXPECT_FALSE(looks(std::string("\x80\x01", 2)));
  EXPECT_FALSE(looks("PK\x03\x04"));
  EXPECT_FALSE(looks(""));
  EXPECT_FALSE(looks("{\"a\": 1}"));
}

TEST(PickleTest, DtypeNamesAndSizes) {
  EXPECT_STREQ(PickleDtypeName(PickleDtype::kF16), "float16");
  EXPECT_STREQ(PickleDtypeName(PickleDtype::kBool), "bool");
  EXPECT_EQ(PickleDtypeSize(PickleDtype::kU64), 8u);
  EXPECT_EQ(PickleDtypeSize(PickleDtype::kI16), 2u);
}

// --- Pickles written by Python and numpy -----------------------------------------------------

void ExpectTree(const PickleObject& o, const nlohmann::json& j, const std::string& path) {
  const std::string t = j.at("t");
  SCOPED_TRACE(path);
  if (t == "none") {
    EXPECT_EQ(o.kind, Kind::kNone);
  } else if (t == "bool") {
    ASSERT_EQ(o.kind, Kind::kBool);
    EXPECT_EQ(o.b, j.at("v").get<bool>());
  } else if (t == "int") {
    ASSERT_EQ(o.kind, Kind::kInt);
    EXPECT_EQ(std::to_string(o.i), j.at("v").get<std::string>());
  } else if (t == "float") {
    ASSERT_EQ(o.kind, Kind::kFloat);
    EXPECT_EQ(Hex({reinterpret_cast<const char*>(&o.f), 8}), j.at("hex").get<std::string>());
  } else if (t == "str" || t == "bytes") {
    ASSERT_EQ(o.kind, t == "str" ? Kind::kStr : Kind::kBytes);
    EXPECT_EQ(Hex(o.text), j.at("hex").get<std::string>());
  } else if (t == "ndarray") {
    ASSERT_EQ(o.kind, Kind::kArray);
    const PickleArray& a = *o.array;
    EXPECT_EQ(PickleDtypeName(a.dtype), j.at("dtype").get<std::string>());
    EXPECT_EQ(a.shape, j.at("shape").get<std::vector<uint64_t>>());
    EXPECT_EQ(a.fortran_order, j.at("fortran").get<bool>());
    EXPECT_EQ(Hex({reinterpret_cast<const char*>(a.data.data()), a.data.size()}),
              j.at("hex").get<std::string>());
  } else if (t == "dict") {
    ASSERT_EQ(o.kind, Kind::kDict);
    ASSERT_EQ(o.entries.size(), j.at("items").size());
    for (size_t k = 0; k < o.entries.size(); ++k) {
      ExpectTree(*o.entries[k].first, j["items"][k][0], path + "/key" + std::to_string(k));
      ExpectTree(*o.entries[k].second, j["items"][k][1], path + "/" + std::to_string(k));
    }
  } else {
    ASSERT_EQ(o.kind, t == "list" ? Kind::kList : t == "tuple" ? Kind::kTuple : Kind::kSet) << t;
    ASSERT_EQ(o.items.size(), j.at("items").size());
    for (size_t k = 0; k < o.items.size(); ++k)
      ExpectTree(*o.items[k], j["items"][k], path + "[" + std::to_string(k) + "]");
  }
}

class PythonPickleTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    const auto r = testing::Run(testing::Python() + " " + CACT_SOURCE_DIR +
                                "/tests/formats/write_test_pickles.py " + dir_->path());
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { delete dir_; }
  // NAME.json of every NAME.pkl whose name starts with `prefix`.
  static std::vector<std::string> Cases(const std::string& prefix) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_->path())) {
      const std::string n = e.path().filename();
      if (n.rfind(prefix, 0) == 0 && e.path().extension() == ".pkl") out.push_back(e.path().stem());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  static nlohmann::json Json(const std::string& name) {
    std::ifstream f(*dir_ / (name + ".json"));
    return nlohmann::json::parse(f);
  }
  static testing::TempDir* dir_;
};
testing::TempDir* PythonPickleTest::dir_ = nullptr;

TEST_F(PythonPickleTest, DataPicklesOfEveryProtocolDecodeBitForBit) {
  const auto cases = Cases("data_p");
  ASSERT_EQ(cases.size(), 6u);
  for (const std::string& c : cases) {
    auto doc = PickleDocument::Open(*dir_ / (c + ".pkl"));
    ASSERT_TRUE(doc.ok()) << doc.status();
    const int proto = c.back() - '0';
    EXPECT_EQ(doc->protocol(), proto >= 2 ? proto : 0) << c << ": PROTO exists from protocol 2";
    ExpectTree(doc->root(), Json(c), c);
    const PickleObject* state = doc->root().Find("state");
    ASSERT_NE(state, nullptr);
    EXPECT_EQ(state->Find("shared"), state->Find("f32")) << c << ": one memo'd object";
    EXPECT_EQ(state->Find("fortran")->array->fortran_order, true) << c;
  }
}

TEST_F(PythonPickleTest, Numpy2NamesDecodeBitForBit) {
  const auto cases = Cases("numpy2_p");
  ASSERT_EQ(cases.size(), 6u);
  for (const std::string& c : cases) {
    auto doc = PickleDocument::Open(*dir_ / (c + ".pkl"));
    ASSERT_TRUE(doc.ok()) << doc.status();
    ExpectTree(doc->root(), Json(c), c);
  }
}

TEST_F(PythonPickleTest, HostilePicklesAreRefusedAndNothingRuns) {
  const auto cases = Cases("hostile_");
  ASSERT_EQ(cases.size(), 24u);
  for (const std::string& c : cases) {
    auto doc = PickleDocument::Open(*dir_ / (c + ".pkl"));
    ASSERT_FALSE(doc.ok()) << c;
    const std::string msg(doc.status().message());
    EXPECT_EQ(msg.rfind(*dir_ / (c + ".pkl: "), 0), 0u) << msg;
    for (const auto& want : Json(c))
      EXPECT_NE(msg.find(want.get<std::string>()), std::string::npos)
          << c << ": " << msg << " lacks " << want;
  }
  EXPECT_FALSE(std::filesystem::exists(*dir_ / "MARKER"));
}

TEST_F(PythonPickleTest, EveryTruncationOfEveryDataPickleFails) {
  for (const std::string& c : Cases("data_p")) {
    const std::vector<uint8_t> full = testing::ReadAll(*dir_ / (c + ".pkl"));
    const std::string s(full.begin(), full.end());
    ASSERT_EQ(Error(s), "") << c;
    for (size_t n = 0; n < s.size(); ++n)
      ASSERT_NE(Error(s.substr(0, n)), "") << c << " prefix " << n;
  }
}

}  // namespace
}  // namespace cact
