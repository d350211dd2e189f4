#include "models/profile/llama_family.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace wsb {

std::string llama_layer_name(int layer, std::string_view leaf) {
  return fmt::format("model.layers.{}.{}", layer, leaf);
}

namespace {

[[noreturn]] void bad(const std::string& origin, const std::string& field, const std::string& why) {
  throw Error(ErrorKind::Format, fmt::format("{}: field '{}': {}", origin, field, why));
}

void positive(int value, const std::string& origin, const std::string& field) {
  if (value <= 0) bad(origin, field, fmt::format("must be a positive integer, got {}", value));
}

}  // namespace

void validate_llama_dims(const ModelDims& d, const std::string& origin, const LlamaDimFieldNames& n) {
  positive(d.layers, origin, n.layers);
  positive(d.hidden, origin, n.hidden);
  positive(d.intermediate, origin, n.intermediate);
  positive(d.heads, origin, n.heads);
  positive(d.kv_heads, origin, n.kv_heads);
  positive(d.head_dim, origin, n.head_dim);
  positive(d.vocab, origin, n.vocab);
  if (d.heads % d.kv_heads != 0)
    bad(origin, n.kv_heads,
        fmt::format("{} does not divide the {} attention heads (GQA groups must be equal)", d.kv_heads, d.heads));
  // rotate_half pairs element i with element i + head_dim/2 (transformers apply_rotary_pos_emb).
  if (d.head_dim % 2 != 0) bad(origin, n.head_dim, fmt::format("must be even for RoPE, got {}", d.head_dim));
  if (!(d.rope_theta > 0.0)) bad(origin, n.rope_theta, fmt::format("must be > 0, got {}", d.rope_theta));
  if (!(d.rms_eps > 0.0 && d.rms_eps < 1.0))
    bad(origin, n.rms_eps, fmt::format("must be in (0, 1), got {}", d.rms_eps));
}

}  // namespace wsb
