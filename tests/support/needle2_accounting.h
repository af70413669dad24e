// The spec's "Released file, measured" accounting rows of needle2 that do not depend on the
// tokenizer (CQ2, CQ4, FP16), as every test that builds or reads a needle2 layout expects them.
#pragma once
#include <gtest/gtest.h>

#include "formats/cact/accounting.h"

namespace cact::testing {

inline void ExpectReleasedNeedle2Classes(const Accounting& a) {
  EXPECT_EQ(a[WidthClass::kCQ2].tensors, 141u);
  EXPECT_EQ(a[WidthClass::kCQ2].params, 37748736u);
  EXPECT_EQ(a[WidthClass::kCQ2].bytes, 10027008u);
  EXPECT_EQ(a[WidthClass::kCQ4].tensors, 4u);
  EXPECT_EQ(a[WidthClass::kCQ4].params, 5521408u);
  EXPECT_EQ(a[WidthClass::kCQ4].bytes, 2846976u);
  EXPECT_EQ(a[WidthClass::kFP16].tensors, 259u);
  EXPECT_EQ(a[WidthClass::kFP16].params, 364279u);
  EXPECT_EQ(a[WidthClass::kFP16].bytes, 728558u);
}

}  // namespace cact::testing
