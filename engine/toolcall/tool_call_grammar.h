// The byte-level grammar of a Needle answer for one tool catalogue, as a pushdown matcher:
//
//   [" "] ["<think>" TEXT "</think>" "\n"] "<tool_call>" "[" [CALL ("," CALL)*] "]"
//   "</tool_call>" "<|im_end|>"
//   CALL = "{" "\"name\":" NAME ",\"arguments\":" ARGUMENTS "}"
//
// TEXT is any UTF-8 text without "</think>" or "<|im_end|>"; NAME is one declared tool name as a
// JSON string; ARGUMENTS is compact JSON valid for that tool's parameters (engine/toolcall/tool_schema.h):
// only declared keys, each at most once, every required key, enum values byte for byte, integers as
// integer literals, strings valid UTF-8 JSON. The optional leading space is the tokenizer's dummy
// prefix: the official training encodes the answer as its own string.
//
// GrammarState is a small copyable value: the token mask tries a token by feeding its bytes
// to a copy. It also knows the shortest way to finish from where it is, which is what lets
// decoding end with a complete call whatever the token budget.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "engine/toolcall/tool_schema.h"

namespace cact {

class ToolCallGrammar {
 public:
  explicit ToolCallGrammar(ToolCatalog catalog);
  const ToolCatalog& catalog() const { return catalog_; }

 private:
  friend class GrammarState;
  // Sorted byte strings (so the candidates sharing a prefix are one index range), each with
  // a payload (which tool, which property, which marker) and the bytes the shortest valid
  // continuation after it costs, which picks the way to close.
  struct LiteralSet {
    std::vector<std::string> items;
    std::vector<int> payload;
    std::vector<uint32_t> cost;
    bool keys = false;  // object keys: skip the properties already written
  };
  int AddSet(std::vector<std::string> items, std::vector<int> payload, std::vector<uint32_t> extra,
             bool keys = false);
  uint32_t MinLength(int node) const;  // bytes of the shortest value of `node` (-1: any)
  uint8_t MinFirstByte(int node) const;

  ToolCatalog catalog_;
  std::vector<LiteralSet> sets_;
  std::vector<int> node_set_;  // kEnum: its values; kObject: its keys ("name":)
  std::vector<uint32_t> min_len_;
  int lead_set_ = -1, after_think_set_ = -1, call_head_set_ = -1, tail_set_ = -1, bool_set_ = -1,
      null_set_ = -1;
};

class GrammarState {
 public:
  explicit GrammarState(const ToolCallGrammar& grammar);

  // Consumes one byte, or returns false when no valid answer continues with it; after a
  // false the state is unspecified and must be discarded (callers try bytes on copies).
  bool Feed(uint8_t c);
  bool Feed(std::string_view bytes);
  // The whole answer, through <|im_end|>, has been written.
  bool Done() const;
  // Inside the think block (its free text, before "</think>" is complete).
  bool InThink() const;

  // Where the next bytes go, for the token mask's shortcuts: in free think text (no partial
  // "</think>" or UTF-8 sequence), in a string body with no escape or UTF-8 sequence open
  // (`string_room` code points left), or in structure (everything else: the mask tries each token).
  enum class Context { kStructure, kStringBody, kThinkText };
  Context context() const;
  uint32_t string_room() const;

  // The shortest bytes that finish the answer from here (empty when Done()).
  std::string ShortestCompletion() const;
  // In the think block: the bytes that end it and open the call list ("</think>\n<tool_call>"
  // less what is already written), for when its token budget runs out.
  // (An open UTF-8 character is finished first.)
  std::string ThinkExit() const;

 private:
  struct Frame {
    enum Type : uint8_t {
      kEnvelope,
      kCall,
      kObject,
      kFreeObject,
      kArray,
      kString,
      kNumber,
      kLiteral
    };
    Type type = kEnvelope;
    uint8_t phase = 0;
    uint8_t esc = 0;        // string: 1 after '\', 2..5 inside \uXXXX
    uint8_t utf8_left = 0;  // string: continuation bytes still due, next one in [lo, hi]
    uint8_t utf8_lo = 0x80, utf8_hi = 0xBF;
    bool flag = false;     // number: integer only; string: \u escape started with d/D
    int32_t node = -1;     // schema node (-1: any value); literal: its set
    int32_t pending = -1;  // object: property whose value comes next; call: the tool
    uint32_t lo = 0, hi = 0, offset = 0;  // literal: candidate range, bytes matched;
                                          // think: "<|im_end|>" matched
    uint32_t count = 0;  // array items, string code points, number digits, "</think>" matched
    uint64_t seen = 0;   // object: properties written
  };
  enum class Step { kTake, kReject, kRetry };

  Step StepFrame(uint8_t c);
  Step StepLiteral(uint8_t c);
  Step StepString(Frame& f, uint8_t c);
  Step StepNumber(Frame& f, uint8_t c);
  static bool StartCharacter(Frame& f, uint8_t c);
  static bool ContinueCharacter(Frame& f, uint8_t c);
  void PushLiteral(int set);
  bool PushValue(int node, uint8_t c);
  void Pop();  // removes the top frame; a finished literal tells its parent what it matched
  // Ends the top literal as candidate i; a structural literal tells its parent which.
  void FinishLiteral(uint32_t i);
  void LiteralDone(int payload);
  bool Unseen(const ToolCallGrammar::LiteralSet& set, uint32_t i) const;
  bool RequiredMissing(const Frame& object) const;
  bool AnyUnseen(const Frame& object) const;
  // ShortestCompletion's steps: end frames that may end without a byte when ending is the
  // shortest way out, then the next byte of the shortest way.
  bool EndImplicitFrame();
  uint8_t ClosingByte() const;
  uint32_t ChosenLiteral() const;  // the top literal's cheapest valid candidate

  const ToolCallGrammar* g_;
  absl::InlinedVector<Frame, 6> stack_;
};

}  // namespace cact
