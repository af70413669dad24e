#include "engine/toolcall/token_mask.h"

#include <algorithm>

#include "lib/utf8.h"

namespace cact {
namespace {

// Code points of `s` if it is complete, well-formed UTF-8 (no overlongs, no surrogates)
// without any byte of `excluded` (ASCII); -1 otherwise.
int64_t WholeCharacters(std::string_view s, bool (*excluded)(uint8_t)) {
  int64_t chars = 0;
  for (size_t i = 0; i < s.size(); ++chars) {
    const size_t len = Utf8CharLength(s, i);
    if (len == 0 || (len == 1 && excluded(uint8_t(s[i])))) return -1;
    i += len;
  }
  return chars;
}

// What a JSON string cannot hold as it is, and what free think text must not contain.
bool NotInJsonString(uint8_t c) { return c < 0x20 || c == '"' || c == '\\'; }
bool NotInThinkText(uint8_t c) { return c == '<'; }

}  // namespace

VocabularyTrie::VocabularyTrie(const Tokenizer& tokenizer) {
  const auto& pieces = tokenizer.blob().pieces;
  nodes_.emplace_back();
  extra_.emplace_back();
  root_child_.assign(256, 0);
  bytes_.reserve(pieces.size());
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id)
    bytes_.push_back(tokenizer.TokenBytes(id));
  for (int32_t id = 0; id < int32_t(bytes_.size()); ++id) {
    const std::string& b = bytes_[id];
    if (b.empty()) continue;
    uint32_t node = 0;
    for (char c : b) node = AddChild(node, uint8_t(c));
    Node& n = nodes_[node];
    const bool is_byte = pieces[id].type == PieceType::kByte;
    if (n.token < 0) {
      n.token = id;
    } else {
      // Keep a normal piece as the node's own token (it is what the tokenizer writes).
      int32_t other = id;
      if (pieces[n.token].type == PieceType::kByte && !is_byte) std::swap(other, n.token);
      if (!n.extra_tokens) {
        n.extra_tokens = uint32_t(extra_.size());
        extra_.emplace_back();
      }
      extra_[n.extra_tokens].push_back(other);
    }
    const int64_t chars = WholeCharacters(b, NotInJsonString);
    if (chars >= 0) {
      plain_string_.push_back(id);
      plain_string_chars_.push_back(uint32_t(chars));
    } else {
      other_string_.push_back(id);
    }
    (WholeCharacters(b, NotInThinkText) >= 0 ? plain_think_ : other_think_).push_back(id);
  }
}

uint32_t VocabularyTrie::Child(uint32_t node, uint8_t byte) const {
  if (node == 0) return root_child_[byte];
  for (uint32_t c = nodes_[node].first_child; c; c = nodes_[c].next_sibling)
    if (nodes_[c].byte == byte) return c;
  return 0;
}

uint32_t VocabularyTrie::AddChild(uint32_t node, uint8_t byte) {
  if (uint32_t c = Child(node, byte)) return c;
  const uint32_t c = uint32_t(nodes_.size());
  Node n;
  n.byte = byte;
  n.next_sibling = nodes_[node].first_child;
  nodes_.push_back(n);
  nodes_[node].first_child = c;
  if (node == 0) root_child_[byte] = c;
  return c;
}

std::vector<int32_t> VocabularyTrie::GreedyTokens(std::string_view text) const {
  std::vector<int32_t> out;
  for (size_t i = 0; i < text.size();) {
    int32_t best = -1;
    size_t best_len = 0;
    uint32_t node = 0;
    for (size_t k = i; k < text.size(); ++k) {
      node = Child(node, uint8_t(text[k]));
      if (!node) break;
      if (nodes_[node].token >= 0) {
        best = nodes_[node].token;
        best_len = k + 1 - i;
      }
    }
    if (best < 0) return {};
    out.push_back(best);
    i += best_len;
  }
  return out;
}

void TokenMasker::Try(const std::vector<int32_t>& tokens, const GrammarState& state,
                      uint8_t* allowed) const {
  for (int32_t t : tokens) {
    GrammarState s = state;
    if (s.Feed(trie_->bytes(t))) allowed[t] = 1;
  }
}

void TokenMasker::Walk(uint32_t node, const GrammarState& state, uint8_t* allowed) const {
  const auto& nodes = trie_->nodes_;
  for (uint32_t c = nodes[node].first_child; c; c = nodes[c].next_sibling) {
    GrammarState next = state;
    if (!next.Feed(nodes[c].byte)) continue;
    if (nodes[c].token >= 0) allowed[nodes[c].token] = 1;
    if (nodes[c].extra_tokens)
      for (int32_t t : trie_->extra_[nodes[c].extra_tokens]) allowed[t] = 1;
    if (nodes[c].first_child) Walk(c, next, allowed);
  }
}

void TokenMasker::Allowed(const GrammarState& state, std::vector<uint8_t>* allowed) const {
  allowed->assign(size_t(trie_->vocab_size()), 0);
  uint8_t* a = allowed->data();
  switch (state.context()) {
    case GrammarState::Context::kThinkText:
      for (int32_t t : trie_->plain_think_) a[t] = 1;
      Try(trie_->other_think_, state, a);
      return;
    case GrammarState::Context::kStringBody: {
      const uint32_t room = state.string_room();
      for (size_t i = 0; i < trie_->plain_string_.size(); ++i)
        if (trie_->plain_string_chars_[i] <= room) a[trie_->plain_string_[i]] = 1;
      Try(trie_->other_string_, state, a);
      return;
    }
    case GrammarState::Context::kStructure:
      Walk(0, state, a);
      return;
  }
}

}  // namespace cact
