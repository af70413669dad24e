// Which tokens keep a tool-call answer valid: the vocabulary as the bytes each token writes,
// in a trie, walked together with a GrammarState so a shared prefix is checked once.
// Two contexts skip the walk: inside a JSON string body every token of plain characters
// is allowed (only tokens with a quote, backslash, control byte or a partial UTF-8 sequence
// are tried), and in free think text every token of whole characters without '<' is.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/text/tokenizer.h"
#include "engine/toolcall/tool_call_grammar.h"

namespace cact {

class VocabularyTrie {
 public:
  explicit VocabularyTrie(const Tokenizer& tokenizer);

  int32_t vocab_size() const { return int32_t(bytes_.size()); }
  // The bytes token `id` writes (Tokenizer::TokenBytes); empty for control and unknown
  // pieces, which are never allowed in an answer.
  const std::string& bytes(int32_t id) const { return bytes_[id]; }
  // Longest-match tokenization of `text`: an achievable (not always the shortest) way to
  // write it, which is what a token budget needs. Empty when some byte has no token.
  std::vector<int32_t> GreedyTokens(std::string_view text) const;

 private:
  friend class TokenMasker;
  struct Node {
    uint32_t first_child = 0, next_sibling = 0;  // 0: none (node 0 is the root)
    int32_t token = -1;         // a token writing exactly this node's bytes (a normal piece
                                // preferred over a byte piece), -1 if none
    uint32_t extra_tokens = 0;  // index into extra_ of the other tokens with these bytes
    uint8_t byte = 0;
  };
  uint32_t Child(uint32_t node, uint8_t byte) const;
  uint32_t AddChild(uint32_t node, uint8_t byte);

  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;
  std::vector<std::vector<int32_t>> extra_;  // [0] unused
  std::vector<uint32_t> root_child_;         // 256 entries: the root's children by byte
  // Context shortcuts: tokens of plain string characters (with their code point counts) and
  // the other answer tokens; tokens of whole UTF-8 characters without '<' (free think text)
  // and the others.
  std::vector<int32_t> plain_string_, other_string_, plain_think_, other_think_;
  std::vector<uint32_t> plain_string_chars_;
};

class TokenMasker {
 public:
  explicit TokenMasker(const VocabularyTrie& trie) : trie_(&trie) {}
  // allowed[t] = 1 iff writing token t keeps the answer a valid prefix (sized to the vocab).
  void Allowed(const GrammarState& state, std::vector<uint8_t>* allowed) const;

 private:
  void Walk(uint32_t node, const GrammarState& state, uint8_t* allowed) const;
  void Try(const std::vector<int32_t>& tokens, const GrammarState& state, uint8_t* allowed) const;
  const VocabularyTrie* trie_;
};

}  // namespace cact
