#include "models/layout/llama_layout.hpp"

#include <fmt/format.h>

#include <map>

#include "core/errors.hpp"
#include "models/profile/llama_family.hpp"

namespace wsb {

namespace {

[[noreturn]] void not_divisible(const ModelProfile& p, int tp, std::string_view dim, int value) {
  throw Error(ErrorKind::Mismatch, fmt::format("profile '{}': tp={} does not divide {} ({})", p.id, tp, dim, value));
}

/// Canonical tensors by name, for the fragments' canonical shapes.
class Canon {
 public:
  explicit Canon(const ModelProfile& p) {
    for (TensorSpec& t : p.canonical_tensors()) by_name_.emplace(t.name, std::move(t));
  }
  const TensorSpec& at(const std::string& name) const { return by_name_.at(name); }

  Fragment rows(const std::string& name, int64_t start, int64_t length) const {
    return Fragment{name, at(name).shape, 0, start, length};
  }
  Fragment cols(const std::string& name, int64_t start, int64_t length) const {
    return Fragment{name, at(name).shape, 1, start, length};
  }
  Fragment whole(const std::string& name) const { return rows(name, 0, at(name).shape.at(0)); }

 private:
  std::map<std::string, TensorSpec> by_name_;
};

/// A storage whose shape is its fragments stacked along dim 0 (they share trailing dims by construction).
RuntimeStorageSpec make_storage(std::string name, DType dtype, std::vector<Fragment> fragments) {
  RuntimeStorageSpec s;
  s.name = std::move(name);
  s.dtype = dtype;
  s.shape = fragments.front().shape();
  for (size_t i = 1; i < fragments.size(); ++i) s.shape[0] += fragments[i].shape()[0];
  s.gathered_shape = s.shape;  // transform "none"
  s.fragments = std::move(fragments);
  return s;
}

RankLayout rank_layout(const ModelProfile& p, const Canon& c, int tp, int rank) {
  const ModelDims& d = p.dims;
  const DType dt = p.dtype;
  const int64_t hd = d.head_dim;
  const int64_t vocab_rows = d.vocab / tp, inter_rows = d.intermediate / tp;
  const LlamaRankHeads heads = llama_rank_heads(d, tp, rank);
  RankLayout out;
  out.rank = rank;
  out.tp = tp;
  auto& s = out.storages;
  s.push_back(make_storage("model.embed_tokens.weight", dt,
                           {c.rows("model.embed_tokens.weight", rank * vocab_rows, vocab_rows)}));
  for (int i = 0; i < d.layers; ++i) {
    auto n = [i](std::string_view leaf) { return llama_layer_name(i, leaf); };
    s.push_back(make_storage(n("input_layernorm.weight"), dt, {c.whole(n("input_layernorm.weight"))}));
    s.push_back(make_storage(n("self_attn.qkv_proj.weight"), dt,
                             {c.rows(n("self_attn.q_proj.weight"), heads.q_head_start * hd, heads.q_heads * hd),
                              c.rows(n("self_attn.k_proj.weight"), heads.kv_head_start * hd, heads.kv_heads * hd),
                              c.rows(n("self_attn.v_proj.weight"), heads.kv_head_start * hd, heads.kv_heads * hd)}));
    s.push_back(make_storage(n("self_attn.o_proj.weight"), dt,
                             {c.cols(n("self_attn.o_proj.weight"), heads.q_head_start * hd, heads.q_heads * hd)}));
    s.push_back(
        make_storage(n("post_attention_layernorm.weight"), dt, {c.whole(n("post_attention_layernorm.weight"))}));
    s.push_back(make_storage(n("mlp.gate_up_proj.weight"), dt,
                             {c.rows(n("mlp.gate_proj.weight"), rank * inter_rows, inter_rows),
                              c.rows(n("mlp.up_proj.weight"), rank * inter_rows, inter_rows)}));
    s.push_back(make_storage(n("mlp.down_proj.weight"), dt,
                             {c.cols(n("mlp.down_proj.weight"), rank * inter_rows, inter_rows)}));
  }
  s.push_back(make_storage("model.norm.weight", dt, {c.whole("model.norm.weight")}));
  // A tied lm_head has no tensor of its own: its runtime storage is filled from embed_tokens (HF ties the two).
  const std::string head_source = d.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  s.push_back(make_storage("lm_head.weight", dt, {c.rows(head_source, rank * vocab_rows, vocab_rows)}));
  return out;
}

}  // namespace

void check_llama_tp(const ModelProfile& p, int tp) {
  const ModelDims& d = p.dims;
  if (tp < 1) throw Error(ErrorKind::Mismatch, fmt::format("profile '{}': tp must be >= 1, got {}", p.id, tp));
  if (d.heads % tp != 0) not_divisible(p, tp, "heads", d.heads);
  if (tp <= d.kv_heads) {
    if (d.kv_heads % tp != 0) not_divisible(p, tp, "kv_heads", d.kv_heads);
  } else if (tp % d.kv_heads != 0) {
    throw Error(ErrorKind::Mismatch,
                fmt::format("profile '{}': kv_heads ({}) does not divide tp={}, so kv heads cannot be replicated "
                            "evenly",
                            p.id, d.kv_heads, tp));
  }
  if (d.intermediate % tp != 0) not_divisible(p, tp, "intermediate", d.intermediate);
  if (d.vocab % tp != 0) not_divisible(p, tp, "vocab", d.vocab);
}

LlamaRankHeads llama_rank_heads(const ModelDims& d, int tp, int rank) {
  LlamaRankHeads h;
  h.q_heads = d.heads / tp;
  h.q_head_start = rank * h.q_heads;
  if (tp <= d.kv_heads) {
    h.kv_heads = d.kv_heads / tp;
    h.kv_head_start = rank * h.kv_heads;
  } else {
    h.kv_heads = 1;
    h.kv_head_start = rank / (tp / d.kv_heads);
  }
  return h;
}

std::vector<RankLayout> build_llama_layouts(const ModelProfile& profile, int tp) {
  check_llama_tp(profile, tp);
  Canon canon(profile);
  std::vector<RankLayout> out;
  out.reserve(static_cast<size_t>(tp));
  for (int r = 0; r < tp; ++r) out.push_back(rank_layout(profile, canon, tp, r));
  return out;
}

}  // namespace wsb
