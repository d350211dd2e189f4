#pragma once
// Tensor-parallel layout: which bytes of which canonical tensors make up each runtime storage of each TP rank.
// Conventions (Megatron/SGLang): qkv_proj fused [q|k|v] rows, k/v shard = rank / (tp / kv_heads) when
// tp > kv_heads; gate_up_proj = [gate slice; up slice]; o_proj/down_proj row-parallel (input columns sliced);
// norms replicated; embed_tokens and lm_head vocab-parallel (rows sliced). The MoE families (glm4_moe,
// deepseek_v3, gpt_oss) are documented storage by storage in models/layout/moe_layout.hpp.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/scratch_bytes.hpp"
#include "core/tensor_spec.hpp"
#include "models/profile/profile.hpp"

namespace wsb {

/// A slice [start, start + length) of one canonical tensor along `dim` of its row-major N-D shape (0 = rows,
/// 1 = columns of a 2-D tensor; 1-D tensors use dim 0; a scalar, shape [], is taken whole with dim 0, start 0,
/// length 1). Its bytes are, for every index of the dims before `dim`, one contiguous run.
struct Fragment {
  std::string canonical;
  Shape canonical_shape;
  int dim = 0;
  int64_t start = 0;
  int64_t length = 0;
  /// Shape of the slice.
  Shape shape() const;
};

/// One runtime storage of one TP rank. Its fragments' bytes, concatenated in order, form the gathered tensor of
/// shape `gathered_shape` (row-major; e.g. per-expert fragments [gate; up] of [rows, K] each stack into
/// [E, 2*rows, K]). `transform` names the quantization post-load transform (models/transform/transform.hpp) that
/// turns the gathered tensor into the runtime tensor of shape `shape`; for "none" the two shapes are equal.
/// `dtype` is the element type of both (transforms move, pad or combine elements; they never change type).
struct RuntimeStorageSpec {
  std::string name;
  DType dtype = DType::BF16;
  Shape shape;
  std::vector<Fragment> fragments;
  std::string transform = "none";
  Shape gathered_shape;  ///< shape of the concatenated fragments before the transform
  /// Runtime bytes: numel(shape) * dtype size.
  uint64_t bytes() const;
  /// Bytes of the concatenated fragments: numel(gathered_shape) * dtype size.
  uint64_t gathered_bytes() const;
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

/// The ordinary loader for one storage: gathers its fragments from canonical tensors (directly into `out` for
/// transform "none", else into a temporary of gathered_bytes()) and applies the post-load transform into `out`
/// (out.size() == spec.bytes()). Every byte of `out` is written, padding included, so loading into a buffer that
/// holds an older version gives the same bytes as loading into a fresh one. Throws Error(Mismatch) when a
/// canonical tensor's byte size disagrees with its declared shape or the fragments disagree with gathered_shape,
/// Error(Format) for an unknown transform, and whatever the transform throws (models/transform/transform.hpp).
/// `scratch` (optional) holds the gathered copy a transform other than "none" reads: kept by the caller from call to
/// call, so a prepare that loads thousands of storages allocates (and page-faults) it once, not per storage.
void load_storage(const RuntimeStorageSpec& spec, const CanonicalLookup& canonical, std::span<uint8_t> out,
                  ScratchBytes* scratch = nullptr);

/// Leading-dim slices of `spec` that load_storage_slices can load independently, else 1: shape[0] (rows of a
/// transform-"none" storage of rank >= 2, or the E experts of a stacked [E, ...] storage of rank >= 3) when runtime
/// and gathered shapes start with the same extent, the fragments either fall into shape[0] equal groups or are one
/// canonical tensor stacked along dim 0, and the transform works slice by slice ("none" and every MoE transform:
/// fp8_channel_weight/scale, mxfp4_pad, mxfp4_scale_swizzle, nvfp4_scale_swizzle each write expert e's bytes at
/// e * (runtime bytes / E) from expert e's gathered bytes alone).
int64_t storage_slices(const RuntimeStorageSpec& spec);

/// load_storage for slices [first, first + count) of the leading dim only: writes exactly those slices' bytes of
/// `out` (the whole storage, out.size() == spec.bytes()), leaving the rest untouched, so disjoint ranges can load
/// on different threads. Byte-identical to the same range of load_storage's output. Throws Error(Mismatch) when the
/// range is outside [0, storage_slices(spec)), plus load_storage's errors.
void load_storage_slices(const RuntimeStorageSpec& spec, const CanonicalLookup& canonical, std::span<uint8_t> out,
                         int64_t first, int64_t count, ScratchBytes* scratch = nullptr);

/// load_storage_slices writing the slices' bytes into `slices_out` (count x spec.bytes() / storage_slices(spec)
/// bytes, slice `first` at byte 0) instead of at their place in the whole storage: a build that compares its
/// output with the bytes it replaces (device-delta) builds into a scratch buffer this way. Throws Error(Mismatch)
/// for a range outside [0, storage_slices(spec)) or an output of another size, plus load_storage's errors.
void load_storage_slices_into(const RuntimeStorageSpec& spec, const CanonicalLookup& canonical,
                              std::span<uint8_t> slices_out, int64_t first, int64_t count,
                              ScratchBytes* scratch = nullptr);

/// Rows of the gathered tensor of `spec` (a row: the last dim of gathered_shape; rows counted row-major over the
/// leading dims, e.g. row e * N + n of [E, N, K]): rows[i] points at gathered row first + i where it lies in its
/// canonical tensor, so a transform that reads rows (fp8_channel_weight_band) needs no gathered copy. Throws
/// Error(Mismatch) naming the storage as load_storage does (a canonical tensor of the wrong size, fragments that
/// disagree with gathered_shape), or when a fragment's runs are not whole rows or [first, first + rows.size()) is
/// outside the gathered rows.
void storage_rows(const RuntimeStorageSpec& spec, const CanonicalLookup& canonical, int64_t first,
                  std::span<const uint8_t*> rows);

/// The gather half of load_storage: concatenates the storage's fragments into `out` (out.size() ==
/// spec.gathered_bytes()) without the post-load transform, for a transform that runs elsewhere (on the device).
/// Same errors as load_storage, minus the transform's.
void gather_storage(const RuntimeStorageSpec& spec, const CanonicalLookup& canonical, std::span<uint8_t> out);

}  // namespace wsb
