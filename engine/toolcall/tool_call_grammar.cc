#include "engine/toolcall/tool_call_grammar.h"

#include <algorithm>
#include <numeric>

#include "engine/text/python_json.h"

namespace cact {
namespace {

constexpr std::string_view kThinkEnd = "</think>";
// Think text must not end the turn: the runtime stops at this marker.
constexpr std::string_view kTurnEnd = "<|im_end|>";
// A shortest way out never opens a think block: its marker costs more than any call.
constexpr uint32_t kThinkDetour = 1u << 20;
// Digits: an integer stays exact in int64; a number keeps at most 15 digits before its
// exponent and two in it, so it is a finite double whose shortest form is the same decimal
// (15 significant digits round-trip through a double), and the calls read back from the
// answer print exactly what the model wrote.
constexpr uint32_t kMaxIntegerDigits = 18;
constexpr uint32_t kMaxNumberDigits = 15;
constexpr uint32_t kMaxExponentDigits = 2;

namespace envelope {
enum : uint8_t { kLead, kThink, kAfterThink, kOpen, kFirst, kNext, kNeedCall, kTail, kDone };
}
namespace call {
enum : uint8_t { kHead, kArgs, kClose };
}
namespace object {
enum : uint8_t { kOpen, kStart, kKey, kKeyLiteral, kValue, kAfter };
}
namespace free_object {
enum : uint8_t { kOpen, kStart, kColon, kValue, kAfter, kKey };
}
namespace array {
enum : uint8_t { kOpen, kStart, kAfter, kNeed };
}
namespace text {
enum : uint8_t { kOpen, kBody };
}
namespace number {
enum : uint8_t { kStart, kMinus, kZero, kInt, kDot, kFrac, kExp, kExpSign, kExpDigits };
}

bool IsDigit(uint8_t c) { return c >= '0' && c <= '9'; }

// The bytes a value of each kind of a type union can start with.
bool StartsKind(SchemaNode::Kind kind, uint8_t c) {
  switch (kind) {
    case SchemaNode::kObject:
      return c == '{';
    case SchemaNode::kArray:
      return c == '[';
    case SchemaNode::kString:
      return c == '"';
    case SchemaNode::kInteger:
    case SchemaNode::kNumber:
      return c == '-' || IsDigit(c);
    case SchemaNode::kBoolean:
      return c == 't' || c == 'f';
    case SchemaNode::kNull:
      return c == 'n';
    default:
      return false;
  }
}
bool IsHex(uint8_t c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

}  // namespace

// ---------------------------------------------------------------------------------------
// The grammar: literal sets and the shortest value of every schema node.

ToolCallGrammar::ToolCallGrammar(ToolCatalog catalog) : catalog_(std::move(catalog)) {
  const std::vector<SchemaNode>& nodes = catalog_.nodes;
  // Children come before their parents in `nodes` (the parser adds a node after its
  // children), so one forward pass computes every shortest length.
  min_len_.assign(nodes.size(), 1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const SchemaNode& n = nodes[i];
    uint32_t len = 1;
    if (!n.members.empty()) {
      len = UINT32_MAX;
      for (int m : n.members) len = std::min(len, min_len_[m]);
    } else {
      switch (n.kind) {
        case SchemaNode::kAny:
        case SchemaNode::kInteger:
        case SchemaNode::kNumber:
          len = 1;
          break;  // 0
        case SchemaNode::kBoolean:
          len = 4;
          break;  // true
        case SchemaNode::kNull:
          len = 4;
          break;
        case SchemaNode::kString:
          len = 2 + n.min_length;
          break;
        case SchemaNode::kEnum: {
          len = UINT32_MAX;
          for (const std::string& v : n.values) len = std::min<uint32_t>(len, v.size());
          break;
        }
        case SchemaNode::kArray: {
          const uint32_t item = MinLength(n.items);
          len = 2 + n.min_items * (item + 1) - (n.min_items ? 1 : 0);
          break;
        }
        case SchemaNode::kObject: {
          len = 2;
          for (const SchemaNode::Property& p : n.properties)
            if (p.required) len += uint32_t(PythonJsonDumps(p.name).size()) + 2 + min_len_[p.node];
          break;
        }
      }
    }
    min_len_[i] = len;
  }

  node_set_.assign(nodes.size(), -1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const SchemaNode& n = nodes[i];
    if (!n.members.empty()) continue;
    if (n.kind == SchemaNode::kEnum) {
      node_set_[i] = AddSet(n.values, {}, {});
    } else if (n.kind == SchemaNode::kObject && !n.properties.empty()) {
      // The opening quote is consumed by the object; a key literal is the rest: name":
      std::vector<std::string> keys;
      std::vector<int> props;
      std::vector<uint32_t> extra;
      for (size_t p = 0; p < n.properties.size(); ++p) {
        keys.push_back(PythonJsonDumps(n.properties[p].name).substr(1) + ":");
        props.push_back(int(p));
        extra.push_back(min_len_[n.properties[p].node]);
      }
      node_set_[i] = AddSet(std::move(keys), std::move(props), std::move(extra), /*keys=*/true);
    }
  }

  lead_set_ = AddSet({" <think>", " <tool_call>", "<think>", "<tool_call>"}, {0, 1, 0, 1},
                     {kThinkDetour, 0, kThinkDetour, 0});
  after_think_set_ = AddSet({"\n<tool_call>"}, {0}, {0});
  tail_set_ = AddSet({"</tool_call><|im_end|>"}, {0}, {0});
  bool_set_ = AddSet({"false", "true"}, {}, {});
  null_set_ = AddSet({"null"}, {}, {});
  std::vector<std::string> heads;
  std::vector<int> tools;
  std::vector<uint32_t> extra;
  for (size_t t = 0; t < catalog_.tools.size(); ++t) {
    heads.push_back("\"name\":" + PythonJsonDumps(catalog_.tools[t].name) + ",\"arguments\":");
    tools.push_back(int(t));
    extra.push_back(min_len_[catalog_.tools[t].arguments] + 1);
  }
  call_head_set_ = AddSet(std::move(heads), std::move(tools), std::move(extra));
}

int ToolCallGrammar::AddSet(std::vector<std::string> items, std::vector<int> payload,
                            std::vector<uint32_t> extra, bool keys) {
  if (payload.empty()) {
    payload.resize(items.size());
    std::iota(payload.begin(), payload.end(), 0);
  }
  if (extra.empty()) extra.assign(items.size(), 0);
  std::vector<size_t> order(items.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return items[a] < items[b]; });
  LiteralSet set;
  set.keys = keys;
  for (size_t i : order) {
    set.items.push_back(items[i]);
    set.payload.push_back(payload[i]);
    set.cost.push_back(uint32_t(items[i].size()) + extra[i]);
  }
  sets_.push_back(std::move(set));
  return int(sets_.size() - 1);
}

uint32_t ToolCallGrammar::MinLength(int node) const { return node < 0 ? 1 : min_len_[node]; }

uint8_t ToolCallGrammar::MinFirstByte(int node) const {
  if (node < 0) return '0';
  const SchemaNode& n = catalog_.nodes[node];
  if (!n.members.empty()) {
    int best = n.members[0];
    for (int m : n.members)
      if (min_len_[m] < min_len_[best]) best = m;
    return MinFirstByte(best);
  }
  switch (n.kind) {
    case SchemaNode::kObject:
      return '{';
    case SchemaNode::kArray:
      return '[';
    case SchemaNode::kString:
      return '"';
    case SchemaNode::kBoolean:
      return 't';
    case SchemaNode::kNull:
      return 'n';
    case SchemaNode::kEnum: {
      const LiteralSet& set = sets_[node_set_[node]];
      size_t best = 0;
      for (size_t i = 1; i < set.items.size(); ++i)
        if (set.cost[i] < set.cost[best]) best = i;
      return uint8_t(set.items[best][0]);
    }
    default:
      return '0';
  }
}

// ---------------------------------------------------------------------------------------
// Matching.

GrammarState::GrammarState(const ToolCallGrammar& grammar) : g_(&grammar) {
  stack_.push_back(Frame{.type = Frame::kEnvelope, .phase = envelope::kLead});
  PushLiteral(g_->lead_set_);
  stack_.back().flag = true;
}

bool GrammarState::Feed(std::string_view bytes) {
  for (char c : bytes)
    if (!Feed(uint8_t(c))) return false;
  return true;
}

bool GrammarState::Feed(uint8_t c) {
  // A byte can end several frames (a number, then nothing else) before one takes it.
  for (int hops = 0; hops < 64 && !stack_.empty(); ++hops) {
    switch (StepFrame(c)) {
      case Step::kTake:
        return true;
      case Step::kReject:
        return false;
      case Step::kRetry:
        break;
    }
  }
  return false;
}

bool GrammarState::Done() const { return stack_.size() == 1 && stack_[0].phase == envelope::kDone; }

bool GrammarState::InThink() const {
  return stack_.size() == 1 && stack_[0].phase == envelope::kThink;
}

GrammarState::Context GrammarState::context() const {
  const Frame& f = stack_.back();
  if (f.type == Frame::kEnvelope && f.phase == envelope::kThink && f.count == 0 && f.offset == 0 &&
      f.utf8_left == 0)
    return Context::kThinkText;
  if (f.type == Frame::kString && f.phase == text::kBody && f.esc == 0 && f.utf8_left == 0)
    return Context::kStringBody;
  return Context::kStructure;
}

uint32_t GrammarState::string_room() const {
  const Frame& f = stack_.back();
  const uint32_t max = f.node < 0 ? UINT32_MAX : g_->catalog_.nodes[f.node].max_length;
  return max - std::min(max, f.count);
}

void GrammarState::PushLiteral(int set) {
  stack_.push_back(
      Frame{.type = Frame::kLiteral, .node = set, .hi = uint32_t(g_->sets_[set].items.size())});
}

bool GrammarState::PushValue(int node, uint8_t c) {
  if (node >= 0 && !g_->catalog_.nodes[node].members.empty()) {
    // A union's members are different kinds, so the first byte picks one.
    for (int m : g_->catalog_.nodes[node].members)
      if (StartsKind(g_->catalog_.nodes[m].kind, c)) return PushValue(m, c);
    return false;
  }
  SchemaNode::Kind kind = node < 0 ? SchemaNode::kAny : g_->catalog_.nodes[node].kind;
  if (kind == SchemaNode::kAny) {
    if (c == '{') {
      stack_.push_back(Frame{.type = Frame::kFreeObject});
    } else if (c == '[') {
      stack_.push_back(Frame{.type = Frame::kArray, .node = -1});
    } else if (c == '"') {
      stack_.push_back(Frame{.type = Frame::kString, .node = -1});
    } else if (c == '-' || IsDigit(c)) {
      stack_.push_back(Frame{.type = Frame::kNumber});
    } else if (c == 't' || c == 'f') {
      PushLiteral(g_->bool_set_);
    } else if (c == 'n') {
      PushLiteral(g_->null_set_);
    } else {
      return false;
    }
    return true;
  }
  switch (kind) {
    case SchemaNode::kObject:
      stack_.push_back(Frame{.type = Frame::kObject, .node = node});
      break;
    case SchemaNode::kArray:
      stack_.push_back(Frame{.type = Frame::kArray, .node = node});
      break;
    case SchemaNode::kString:
      stack_.push_back(Frame{.type = Frame::kString, .node = node});
      break;
    case SchemaNode::kInteger:
    case SchemaNode::kNumber:
      stack_.push_back(
          Frame{.type = Frame::kNumber, .flag = kind == SchemaNode::kInteger, .node = node});
      break;
    case SchemaNode::kBoolean:
      PushLiteral(g_->bool_set_);
      break;
    case SchemaNode::kNull:
      PushLiteral(g_->null_set_);
      break;
    case SchemaNode::kEnum:
      PushLiteral(g_->node_set_[node]);
      break;
    case SchemaNode::kAny:
      break;
  }
  return true;
}

void GrammarState::Pop() { stack_.pop_back(); }

void GrammarState::FinishLiteral(uint32_t i) {
  const int payload = g_->sets_[stack_.back().node].payload[i];
  const bool report = stack_.back().flag;
  Pop();
  if (report) LiteralDone(payload);
}

void GrammarState::LiteralDone(int payload) {
  Frame& p = stack_.back();
  switch (p.type) {
    case Frame::kEnvelope:
      if (p.phase == envelope::kLead) {
        p.phase = payload == 0 ? envelope::kThink : envelope::kOpen;
        p.count = 0;
      } else if (p.phase == envelope::kAfterThink) {
        p.phase = envelope::kOpen;
      } else if (p.phase == envelope::kTail) {
        p.phase = envelope::kDone;
      }
      break;
    case Frame::kCall:
      p.pending = payload;
      p.phase = call::kArgs;
      break;
    case Frame::kObject:
      p.seen |= uint64_t(1) << payload;
      p.pending = payload;
      p.phase = object::kValue;
      break;
    default:
      break;
  }
}

bool GrammarState::Unseen(const ToolCallGrammar::LiteralSet& set, uint32_t i) const {
  if (!set.keys) return true;
  return !(stack_[stack_.size() - 2].seen >> set.payload[i] & 1);
}

bool GrammarState::RequiredMissing(const Frame& f) const {
  const auto& props = g_->catalog_.nodes[f.node].properties;
  for (size_t p = 0; p < props.size(); ++p)
    if (props[p].required && !(f.seen >> p & 1)) return true;
  return false;
}

bool GrammarState::AnyUnseen(const Frame& f) const {
  const size_t n = g_->catalog_.nodes[f.node].properties.size();
  return n > 0 && f.seen != (n == 64 ? ~uint64_t(0) : (uint64_t(1) << n) - 1);
}

GrammarState::Step GrammarState::StepLiteral(uint8_t c) {
  Frame& f = stack_.back();
  const ToolCallGrammar::LiteralSet& set = g_->sets_[f.node];
  const auto& items = set.items;
  // Candidates share their first `offset` bytes, so those continuing with `c` are a range.
  uint32_t lo = f.lo;
  while (lo < f.hi && (items[lo].size() <= f.offset || uint8_t(items[lo][f.offset]) < c)) ++lo;
  uint32_t hi = lo;
  while (hi < f.hi && items[hi].size() > f.offset && uint8_t(items[hi][f.offset]) == c) ++hi;
  bool any = false;
  for (uint32_t i = lo; i < hi && !any; ++i) any = Unseen(set, i);
  if (any) {
    f.lo = lo;
    f.hi = hi;
    ++f.offset;
    if (hi - lo == 1 && items[lo].size() == f.offset) FinishLiteral(lo);
    return Step::kTake;
  }
  // Nothing continues with `c`: a candidate that is complete here ends the literal (the
  // shorter of two numbers in an enum, say) and `c` goes to the parent.
  if (items[f.lo].size() == f.offset && Unseen(set, f.lo)) {
    FinishLiteral(f.lo);
    return Step::kRetry;
  }
  return Step::kReject;
}

// UTF-8 as JSON and the tokenizer's decoder accept it: a lead byte fixes how many
// continuation bytes follow and the range of the first (no overlongs, no surrogates).
bool GrammarState::StartCharacter(Frame& f, uint8_t c) {
  if (c < 0x80) return true;
  if (c >= 0xC2 && c <= 0xDF) {
    f.utf8_left = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    f.utf8_left = 2;
    if (c == 0xE0) f.utf8_lo = 0xA0;
    if (c == 0xED) f.utf8_hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    f.utf8_left = 3;
    if (c == 0xF0) f.utf8_lo = 0x90;
    if (c == 0xF4) f.utf8_hi = 0x8F;
  } else {
    return false;
  }
  return true;
}

bool GrammarState::ContinueCharacter(Frame& f, uint8_t c) {
  if (c < f.utf8_lo || c > f.utf8_hi) return false;
  --f.utf8_left;
  f.utf8_lo = 0x80;
  f.utf8_hi = 0xBF;
  return true;
}

GrammarState::Step GrammarState::StepString(Frame& f, uint8_t c) {
  if (f.phase == text::kOpen) {
    if (c != '"') return Step::kReject;
    f.phase = text::kBody;
    return Step::kTake;
  }
  if (f.utf8_left) return ContinueCharacter(f, c) ? Step::kTake : Step::kReject;
  if (f.esc == 1) {
    if (c == 'u') {
      f.esc = 2;
      return Step::kTake;
    }
    if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' && c != 'n' && c != 'r' &&
        c != 't')
      return Step::kReject;
    f.esc = 0;
    return Step::kTake;
  }
  if (f.esc >= 2) {
    if (!IsHex(c)) return Step::kReject;
    // \uD800..\uDFFF are surrogates: alone they are not text, and pairs are not worth
    // their cost here (any character can be written as UTF-8 instead).
    if (f.esc == 2) f.flag = c == 'd' || c == 'D';
    if (f.esc == 3 && f.flag && !(c >= '0' && c <= '7')) return Step::kReject;
    f.esc = f.esc == 5 ? 0 : f.esc + 1;
    return Step::kTake;
  }
  const SchemaNode* n = f.node < 0 ? nullptr : &g_->catalog_.nodes[f.node];
  if (c == '"') {
    if (n && f.count < n->min_length) return Step::kReject;
    Pop();
    return Step::kTake;
  }
  if (c < 0x20 || (n && f.count >= n->max_length)) return Step::kReject;
  if (c == '\\') {
    f.esc = 1;
  } else if (!StartCharacter(f, c)) {
    return Step::kReject;
  }
  ++f.count;
  return Step::kTake;
}

GrammarState::Step GrammarState::StepNumber(Frame& f, uint8_t c) {
  using namespace number;
  const bool digit = IsDigit(c);
  const uint32_t mantissa_cap = f.flag ? kMaxIntegerDigits : kMaxNumberDigits;
  auto more_digits = [&](uint32_t cap) {
    if (++f.count > cap) return Step::kReject;
    return Step::kTake;
  };
  switch (f.phase) {
    case kStart:
      if (c == '-') {
        f.phase = kMinus;
        return Step::kTake;
      }
      [[fallthrough]];
    case kMinus:
      if (!digit) return Step::kReject;
      f.phase = c == '0' ? kZero : kInt;
      f.count = 1;
      return Step::kTake;
    case kInt:
      if (digit) return more_digits(mantissa_cap);
      [[fallthrough]];
    case kZero:
      if (!f.flag && c == '.' && f.count < mantissa_cap) {
        f.phase = kDot;  // the fraction's digits count on from the integer part's
        return Step::kTake;
      }
      if (!f.flag && (c == 'e' || c == 'E')) {
        f.phase = kExp;
        f.count = 0;
        return Step::kTake;
      }
      Pop();
      return Step::kRetry;
    case kDot:
      if (!digit) return Step::kReject;
      f.phase = kFrac;
      return more_digits(mantissa_cap);
    case kFrac:
      if (digit) return more_digits(mantissa_cap);
      if (c == 'e' || c == 'E') {
        f.phase = kExp;
        f.count = 0;
        return Step::kTake;
      }
      Pop();
      return Step::kRetry;
    case kExp:
      if (c == '+' || c == '-') {
        f.phase = kExpSign;
        return Step::kTake;
      }
      [[fallthrough]];
    case kExpSign:
      if (!digit) return Step::kReject;
      f.phase = kExpDigits;
      f.count = 1;
      return Step::kTake;
    case kExpDigits:
      if (digit) return more_digits(kMaxExponentDigits);
      Pop();
      return Step::kRetry;
    default:
      return Step::kReject;
  }
}

GrammarState::Step GrammarState::StepFrame(uint8_t c) {
  Frame& f = stack_.back();
  switch (f.type) {
    case Frame::kLiteral:
      return StepLiteral(c);
    case Frame::kString:
      return StepString(f, c);
    case Frame::kNumber:
      return StepNumber(f, c);

    case Frame::kEnvelope:
      switch (f.phase) {
        case envelope::kThink:
          // Free text, but whole UTF-8 characters: the answer stays valid text.
          if (f.utf8_left) return ContinueCharacter(f, c) ? Step::kTake : Step::kReject;
          if (!StartCharacter(f, c)) return Step::kReject;
          // Both markers start with their only '<': a mismatch restarts at '<' or at 0.
          if (c == uint8_t(kTurnEnd[f.offset])) {
            if (++f.offset == kTurnEnd.size()) return Step::kReject;
          } else {
            f.offset = c == '<' ? 1 : 0;
          }
          if (c == uint8_t(kThinkEnd[f.count])) {
            if (++f.count == kThinkEnd.size()) {
              f.phase = envelope::kAfterThink;
              PushLiteral(g_->after_think_set_);
              stack_.back().flag = true;
            }
          } else {
            f.count = c == '<' ? 1 : 0;
          }
          return Step::kTake;
        case envelope::kOpen:
          if (c != '[') return Step::kReject;
          f.phase = envelope::kFirst;
          return Step::kTake;
        case envelope::kFirst:
        case envelope::kNext:
        case envelope::kNeedCall:
          if (c == ']' && f.phase != envelope::kNeedCall) {
            f.phase = envelope::kTail;
            PushLiteral(g_->tail_set_);
            stack_.back().flag = true;
            return Step::kTake;
          }
          if (c == ',' && f.phase == envelope::kNext) {
            f.phase = envelope::kNeedCall;
            return Step::kTake;
          }
          if (c == '{' && f.phase != envelope::kNext && !g_->catalog_.tools.empty()) {
            f.phase = envelope::kNext;
            stack_.push_back(Frame{.type = Frame::kCall, .phase = call::kHead});
            PushLiteral(g_->call_head_set_);
            stack_.back().flag = true;
            return Step::kTake;
          }
          return Step::kReject;
        default:
          return Step::kReject;
      }

    case Frame::kCall:
      if (f.phase == call::kArgs) {
        const int args = g_->catalog_.tools[f.pending].arguments;
        f.phase = call::kClose;
        return PushValue(args, c) ? Step::kRetry : Step::kReject;
      }
      if (f.phase == call::kClose && c == '}') {
        Pop();
        return Step::kTake;
      }
      return Step::kReject;

    case Frame::kObject:
      switch (f.phase) {
        case object::kOpen:
          if (c != '{') return Step::kReject;
          f.phase = object::kStart;
          return Step::kTake;
        case object::kStart:
        case object::kKey:
          if (c == '"' && AnyUnseen(f)) {
            f.phase = object::kKeyLiteral;
            const int set = g_->node_set_[f.node];
            PushLiteral(set);
            stack_.back().flag = true;
            return Step::kTake;
          }
          if (c == '}' && f.phase == object::kStart && !RequiredMissing(f)) {
            Pop();
            return Step::kTake;
          }
          return Step::kReject;
        case object::kValue: {
          const int child = g_->catalog_.nodes[f.node].properties[f.pending].node;
          f.phase = object::kAfter;
          return PushValue(child, c) ? Step::kRetry : Step::kReject;
        }
        case object::kAfter:
          if (c == ',' && AnyUnseen(f)) {
            f.phase = object::kKey;
            return Step::kTake;
          }
          if (c == '}' && !RequiredMissing(f)) {
            Pop();
            return Step::kTake;
          }
          return Step::kReject;
        default:
          return Step::kReject;
      }

    case Frame::kFreeObject:
      switch (f.phase) {
        case free_object::kOpen:
          if (c != '{') return Step::kReject;
          f.phase = free_object::kStart;
          return Step::kTake;
        case free_object::kStart:
        case free_object::kKey:
          if (c == '"') {
            f.phase = free_object::kColon;
            stack_.push_back(Frame{.type = Frame::kString, .phase = text::kBody, .node = -1});
            return Step::kTake;
          }
          if (c == '}' && f.phase == free_object::kStart) {
            Pop();
            return Step::kTake;
          }
          return Step::kReject;
        case free_object::kColon:
          if (c != ':') return Step::kReject;
          f.phase = free_object::kValue;
          return Step::kTake;
        case free_object::kValue:
          f.phase = free_object::kAfter;
          return PushValue(-1, c) ? Step::kRetry : Step::kReject;
        case free_object::kAfter:
          if (c == ',') {
            f.phase = free_object::kKey;
            return Step::kTake;
          }
          if (c == '}') {
            Pop();
            return Step::kTake;
          }
          return Step::kReject;
        default:
          return Step::kReject;
      }

    case Frame::kArray: {
      const SchemaNode* n = f.node < 0 ? nullptr : &g_->catalog_.nodes[f.node];
      const uint32_t min = n ? n->min_items : 0, max = n ? n->max_items : UINT32_MAX;
      const int items = n ? n->items : -1;
      switch (f.phase) {
        case array::kOpen:
          if (c != '[') return Step::kReject;
          f.phase = array::kStart;
          return Step::kTake;
        case array::kStart:
          if (c == ']') {
            if (min > 0) return Step::kReject;
            Pop();
            return Step::kTake;
          }
          if (max == 0) return Step::kReject;
          [[fallthrough]];
        case array::kNeed:
          ++f.count;
          f.phase = array::kAfter;
          return PushValue(items, c) ? Step::kRetry : Step::kReject;
        case array::kAfter:
          if (c == ',' && f.count < max) {
            f.phase = array::kNeed;
            return Step::kTake;
          }
          if (c == ']' && f.count >= min) {
            Pop();
            return Step::kTake;
          }
          return Step::kReject;
        default:
          return Step::kReject;
      }
    }
  }
  return Step::kReject;
}

// ---------------------------------------------------------------------------------------
// The shortest way out.

uint32_t GrammarState::ChosenLiteral() const {
  const Frame& f = stack_.back();
  const ToolCallGrammar::LiteralSet& set = g_->sets_[f.node];
  // Keys: a required one while any is missing, else the cheapest.
  bool need_required = set.keys && RequiredMissing(stack_[stack_.size() - 2]);
  const std::vector<SchemaNode::Property>* props =
      set.keys ? &g_->catalog_.nodes[stack_[stack_.size() - 2].node].properties : nullptr;
  uint32_t best = f.hi;
  for (int pass = 0; pass < 2 && best == f.hi; ++pass) {
    for (uint32_t i = f.lo; i < f.hi; ++i) {
      if (!Unseen(set, i)) continue;
      if (need_required && pass == 0 && !(*props)[set.payload[i]].required) continue;
      if (best == f.hi || set.cost[i] < set.cost[best]) best = i;
    }
  }
  return best;
}

bool GrammarState::EndImplicitFrame() {
  const Frame& f = stack_.back();
  if (f.type == Frame::kNumber && (f.phase == number::kZero || f.phase == number::kInt ||
                                   f.phase == number::kFrac || f.phase == number::kExpDigits)) {
    stack_.pop_back();
    return true;
  }
  if (f.type == Frame::kLiteral) {
    const uint32_t i = ChosenLiteral();
    const ToolCallGrammar::LiteralSet& set = g_->sets_[f.node];
    if (set.items[i].size() == f.offset) {
      FinishLiteral(i);
      return true;
    }
  }
  return false;
}

uint8_t GrammarState::ClosingByte() const {
  const Frame& f = stack_.back();
  switch (f.type) {
    case Frame::kLiteral:
      return uint8_t(g_->sets_[f.node].items[ChosenLiteral()][f.offset]);
    case Frame::kNumber:
      return '0';
    case Frame::kString:
      if (f.phase == text::kOpen) return '"';
      if (f.utf8_left) return f.utf8_lo;
      if (f.esc == 1) return 'n';
      if (f.esc >= 2) return '0';
      if (f.node >= 0 && f.count < g_->catalog_.nodes[f.node].min_length) return 'a';
      return '"';
    case Frame::kEnvelope:
      switch (f.phase) {
        case envelope::kThink:
          return f.utf8_left ? f.utf8_lo : uint8_t(kThinkEnd[f.count]);
        case envelope::kOpen:
          return '[';
        case envelope::kNeedCall:
          return '{';
        default:
          return ']';
      }
    case Frame::kCall:
      return f.phase == call::kArgs ? g_->MinFirstByte(g_->catalog_.tools[f.pending].arguments)
                                    : '}';
    case Frame::kObject:
      switch (f.phase) {
        case object::kOpen:
          return '{';
        case object::kKey:
          return '"';
        case object::kValue:
          return g_->MinFirstByte(g_->catalog_.nodes[f.node].properties[f.pending].node);
        case object::kStart:
          return RequiredMissing(f) ? '"' : '}';
        default:
          return RequiredMissing(f) ? ',' : '}';
      }
    case Frame::kFreeObject:
      switch (f.phase) {
        case free_object::kOpen:
          return '{';
        case free_object::kColon:
          return ':';
        case free_object::kValue:
          return '0';
        case free_object::kKey:
          return '"';
        default:
          return '}';
      }
    case Frame::kArray: {
      const SchemaNode* n = f.node < 0 ? nullptr : &g_->catalog_.nodes[f.node];
      const uint32_t min = n ? n->min_items : 0;
      const int items = n ? n->items : -1;
      switch (f.phase) {
        case array::kOpen:
          return '[';
        case array::kNeed:
          return g_->MinFirstByte(items);
        case array::kStart:
          return f.count < min ? g_->MinFirstByte(items) : ']';
        default:
          return f.count < min ? ',' : ']';
      }
    }
  }
  return ']';
}

std::string GrammarState::ThinkExit() const {
  if (!InThink()) return {};
  const Frame& f = stack_[0];
  std::string out;
  if (f.utf8_left) {  // finish the open character first
    out += char(f.utf8_lo);
    out.append(f.utf8_left - 1, char(0x80));
  }
  return out + std::string(kThinkEnd.substr(f.utf8_left ? 0 : f.count)) + "\n<tool_call>";
}

std::string GrammarState::ShortestCompletion() const {
  GrammarState s = *this;
  std::string out;
  // Every step writes a byte of the cheapest way out or ends a frame, so this terminates;
  // the cap only guards against a bug turning into a hang.
  for (int guard = 0; guard < (1 << 20) && !s.Done(); ++guard) {
    if (s.EndImplicitFrame()) continue;
    const uint8_t c = s.ClosingByte();
    if (!s.Feed(c)) break;
    out += char(c);
  }
  return out;
}

}  // namespace cact
