// What every Needle tokenizer has, official or synthetic: `vocab` pieces, the fixed special
// ids (pad 0, eos 1, bos 2, unk 3), a dummy prefix, byte fallback, and the chat markers as
// user-defined pieces right after the special ids.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>

#include "formats/tokenizer_blob.h"

namespace cact::testing {

inline void ExpectNeedleTokenizerShape(const TokenizerBlob& tok, uint32_t vocab) {
  EXPECT_EQ(tok.pieces.size(), vocab);
  EXPECT_EQ(tok.pad_id, 0u);
  EXPECT_EQ(tok.eos_id, 1u);
  EXPECT_EQ(tok.bos_id, 2u);
  EXPECT_EQ(tok.unk_id, 3u);
  EXPECT_EQ(tok.add_dummy_prefix, 1);
  EXPECT_EQ(tok.byte_fallback, 1);
  for (size_t i = 0; i < ChatMarkers().size(); ++i) {
    EXPECT_EQ(tok.pieces[4 + i].surface, ChatMarkers()[i]);
    EXPECT_EQ(tok.pieces[4 + i].type, PieceType::kUserDefined);
  }
}

}  // namespace cact::testing
