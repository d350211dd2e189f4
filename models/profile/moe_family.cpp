#include "models/profile/moe_family.hpp"

#include <fmt/format.h>

namespace wsb {

bool is_moe_family(std::string_view family) {
  return family == kGlm4MoeFamily || family == kDeepseekV3Family || family == kGptOssFamily;
}

bool is_moe_layer(const ModelDims& dims, int layer) { return dims.experts > 0 && layer >= dims.first_dense_layers; }

bool gpt_oss_is_sliding(int layer) { return layer % 2 == 0; }

int mla_qk_head_dim(const ModelDims& dims) { return dims.qk_nope_head_dim + dims.qk_rope_head_dim; }

int shared_intermediate(const ModelDims& dims) { return dims.shared_experts * dims.moe_intermediate; }

std::string expert_tensor_name(int layer, int expert, std::string_view leaf) {
  return fmt::format("model.layers.{}.mlp.experts.{}.{}", layer, expert, leaf);
}

}  // namespace wsb
