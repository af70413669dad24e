#include "tools/cact-inspect/summary.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tools/cact-inspect/table.h"

namespace cact::inspect {

std::string FileText(const CactFile& f) {
  return absl::StrFormat("%s (%s bytes%s)", f.path(), Thousands(f.bytes().size()),
                         f.bytes().decompressed() ? ", decompressed from zstd" : "");
}

std::string ParametersText(const Accounting& a) {
  return absl::StrFormat("%s (%s CQ-coded), %.4f bits per weight for the whole file",
                         Thousands(a.params), Thousands(a.cq_params), a.file_bpw);
}

std::string EngramText(std::span<const uint32_t> sites, std::span<const uint32_t> orders,
                       uint32_t tables, uint32_t slots, uint32_t sub_dim, uint32_t conv_taps,
                       uint32_t dilation) {
  return absl::StrFormat(
      "sites [%s], orders [%s], %d tables x %s slots x %d, conv %d taps dilation %d",
      absl::StrJoin(sites, ","), absl::StrJoin(orders, ","), tables, Thousands(slots), sub_dim,
      conv_taps, dilation);
}

std::string KvCacheText(uint32_t window, uint32_t bits) {
  return absl::StrFormat("window %s, %s", Thousands(window),
                         bits == 8 ? "int8" : absl::StrFormat("%d-bit", bits));
}

std::string CodebooksText(const CactFile& f) {
  return f.codebook_group()
             ? absl::StrFormat("Lloyd-Max CQ2/CQ3/CQ4, scaled for group %d (values: --tensors)",
                               f.codebook_group())
             : std::string("group not recognised (custom codebook; values: --tensors)");
}

std::string TokenizerText(const TokenizerBlob& t) {
  return absl::StrFormat(
      "%s pieces, pad/eos/bos/unk = %d/%d/%d/%d, dummy prefix %d, byte fallback %d",
      Thousands(t.pieces.size()), t.pad_id, t.eos_id, t.bos_id, t.unk_id, t.add_dummy_prefix,
      t.byte_fallback);
}

}  // namespace cact::inspect
