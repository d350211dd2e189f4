#pragma once
// Field-by-field equality of two profiles' dims and tensor lists, for round trips through config.json.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "models/profile/profile.hpp"

namespace wsb::test {

/// Expects every ModelDims member of `actual` to equal `expected` exactly (doubles compared bit for bit by ==).
inline void expect_same_dims(const ModelDims& actual, const ModelDims& expected) {
  EXPECT_EQ(actual.layers, expected.layers);
  EXPECT_EQ(actual.hidden, expected.hidden);
  EXPECT_EQ(actual.intermediate, expected.intermediate);
  EXPECT_EQ(actual.heads, expected.heads);
  EXPECT_EQ(actual.kv_heads, expected.kv_heads);
  EXPECT_EQ(actual.head_dim, expected.head_dim);
  EXPECT_EQ(actual.vocab, expected.vocab);
  EXPECT_EQ(actual.rope_theta, expected.rope_theta);
  EXPECT_EQ(actual.rms_eps, expected.rms_eps);
  EXPECT_EQ(actual.tie_embeddings, expected.tie_embeddings);
  EXPECT_EQ(actual.moe_intermediate, expected.moe_intermediate);
  EXPECT_EQ(actual.experts, expected.experts);
  EXPECT_EQ(actual.shared_experts, expected.shared_experts);
  EXPECT_EQ(actual.top_k, expected.top_k);
  EXPECT_EQ(actual.first_dense_layers, expected.first_dense_layers);
  EXPECT_EQ(actual.norm_topk_prob, expected.norm_topk_prob);
  EXPECT_EQ(actual.routed_scaling_factor, expected.routed_scaling_factor);
  EXPECT_EQ(actual.q_lora_rank, expected.q_lora_rank);
  EXPECT_EQ(actual.kv_lora_rank, expected.kv_lora_rank);
  EXPECT_EQ(actual.qk_nope_head_dim, expected.qk_nope_head_dim);
  EXPECT_EQ(actual.qk_rope_head_dim, expected.qk_rope_head_dim);
  EXPECT_EQ(actual.v_head_dim, expected.v_head_dim);
  EXPECT_EQ(actual.attention_bias, expected.attention_bias);
  EXPECT_EQ(actual.partial_rotary_factor, expected.partial_rotary_factor);
  EXPECT_EQ(actual.sliding_window, expected.sliding_window);
  EXPECT_EQ(actual.swiglu_limit, expected.swiglu_limit);
  EXPECT_EQ(actual.rope_scaling.factor, expected.rope_scaling.factor);
  EXPECT_EQ(actual.rope_scaling.original_max_position, expected.rope_scaling.original_max_position);
  EXPECT_EQ(actual.rope_scaling.beta_fast, expected.rope_scaling.beta_fast);
  EXPECT_EQ(actual.rope_scaling.beta_slow, expected.rope_scaling.beta_slow);
  EXPECT_EQ(actual.rope_scaling.mscale, expected.rope_scaling.mscale);
  EXPECT_EQ(actual.rope_scaling.mscale_all_dim, expected.rope_scaling.mscale_all_dim);
  EXPECT_EQ(actual.rope_scaling.truncate, expected.rope_scaling.truncate);
}

/// "name DTYPE [d0, d1]" per canonical tensor, in order: a readable form for EXPECT_EQ on tensor lists.
inline std::vector<std::string> tensor_lines(const ModelProfile& profile) {
  std::vector<std::string> lines;
  for (const TensorSpec& t : profile.canonical_tensors())
    lines.push_back(t.name + " " + std::string(dtype_name(t.dtype)) + " " + shape_string(t.shape));
  return lines;
}

/// A profile read back from a config (or checkpoint) equals `expected` in dims, family, quantization, dtype,
/// tensor prefix and canonical tensor list.
inline void expect_same_profile(const ModelProfile& actual, const ModelProfile& expected) {
  expect_same_dims(actual.dims, expected.dims);
  EXPECT_EQ(actual.family, expected.family);
  EXPECT_EQ(actual.quantization, expected.quantization);
  EXPECT_EQ(actual.dtype, expected.dtype);
  EXPECT_EQ(actual.tensor_prefix, expected.tensor_prefix);
  EXPECT_EQ(tensor_lines(actual), tensor_lines(expected));
}

}  // namespace wsb::test
