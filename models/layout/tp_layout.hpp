#pragma once
// Tensor-parallel layout: which bytes of which canonical tensors make up each runtime storage of each TP rank.
// Conventions (Megatron/SGLang): qkv_proj fused [q|k|v] rows, k/v shard = rank / (tp / kv_heads) when
// tp > kv_heads; gate_up_proj = [gate slice; up slice]; o_proj/down_proj row-parallel (input columns sliced);
// norms replicated; embed_tokens and lm_head vocab-parallel (rows sliced).
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "models/core/tensor_spec.hpp"
#include "models/profile/profile.hpp"

namespace wsb {

/// A slice of one canonical tensor along `dim` (0 = rows, 1 = columns of a 2-D tensor; 1-D tensors use dim 0).
struct Fragment {
  std::string canonical;
  Shape canonical_shape;
  int dim = 0;
  int64_t start = 0;
  int64_t length = 0;
  /// Shape of the slice.
  Shape shape() const;
};

/// One runtime storage of one TP rank: its fragments concatenated along dim 0 (all fragments of a storage have
/// the same trailing dims). `transform` names the quantization post-load transform ("none" for BF16).
struct RuntimeStorageSpec {
  std::string name;
  DType dtype = DType::BF16;
  Shape shape;
  std::vector<Fragment> fragments;
  std::string transform = "none";
  uint64_t bytes() const;
};

/// Every runtime storage of one TP rank, in a fixed order shared by all ranks.
struct RankLayout {
  int rank = 0;
  int tp = 1;
  std::vector<RuntimeStorageSpec> storages;
  uint64_t bytes() const;
  /// Index of the storage named `name`; throws Error(Missing).
  size_t index_of(std::string_view name) const;
};

/// Builds the layouts of all `tp` ranks. Throws Error(Mismatch) naming the dimension that `tp` does not divide.
std::vector<RankLayout> build_rank_layouts(const ModelProfile& profile, int tp);

/// Returns the canonical bytes of a tensor by name (throws if absent).
using CanonicalLookup = std::function<std::span<const uint8_t>(const std::string& canonical)>;

/// The ordinary loader for one storage: gathers its fragments from canonical tensors into `out`
/// (out.size() == spec.bytes()), then applies the post-load transform. Throws Error(Mismatch) when a canonical
/// tensor's byte size disagrees with its declared shape.
void load_storage(const RuntimeStorageSpec& spec, const CanonicalLookup& canonical, std::span<uint8_t> out);

}  // namespace wsb
