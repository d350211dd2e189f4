// Rank slices of the sharded expert dims (moe_layout.hpp).
#include <algorithm>

#include "models/layout/moe_layout.hpp"
#include "models/profile/moe_family.hpp"

namespace wsb {

RankSlice moe_intermediate_slice(const ModelDims& d, int tp, int rank) {
  const int64_t per = d.moe_intermediate / tp;
  return {rank * per, per, per};
}

RankSlice gpt_oss_intermediate_slice(const ModelDims& d, int tp, int rank) {
  // vLLM gpt_oss.py (mxfp4 weights): per_rank_intermediate_size_block = cdiv(I / 32, tp), so no MX block is ever
  // split between ranks; the last ranks may hold fewer (or no) blocks and are zero-padded to the same size.
  const int64_t blocks = d.intermediate / kMxfp4Block;
  const int64_t per_blocks = (blocks + tp - 1) / tp;
  const int64_t padded = per_blocks * kMxfp4Block;
  const int64_t start = std::min<int64_t>(rank * padded, d.intermediate);
  const int64_t end = std::min<int64_t>(start + padded, d.intermediate);
  return {start, end - start, padded};
}

RankSlice gpt_oss_bf16_intermediate_slice(const ModelDims& d, int tp, int rank) {
  // SGLang FusedMoE: intermediate_size_per_partition = intermediate_size // moe_tp_size (asserted divisible).
  const int64_t per = d.intermediate / tp;
  return {rank * per, per, per};
}

RankSlice gpt_oss_expert_slice(const ModelProfile& p, int tp, int rank) {
  return p.quantization == kQuantMxfp4 ? gpt_oss_intermediate_slice(p.dims, tp, rank)
                                       : gpt_oss_bf16_intermediate_slice(p.dims, tp, rank);
}

RankSlice nvfp4_w2_scale_columns(const ModelDims& d, int tp, int rank) {
  const RankSlice k = moe_intermediate_slice(d, tp, rank);
  const int64_t c0 = k.start / kNvfp4Block;
  const int64_t c1 = (k.start + k.length + kNvfp4Block - 1) / kNvfp4Block;
  return {c0, c1 - c0, c1 - c0};
}

}  // namespace wsb
