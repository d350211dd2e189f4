#pragma once
// The check that a Hugging Face checkpoint directory holds exactly the tensors its config.json describes, run by
// profile_from_hf_dir so that every user of a Hugging Face directory passes it. Only safetensors headers are read
// (CheckpointReader maps the shards; no tensor byte is touched).
#include "models/profile/profile.hpp"

namespace wsb {

/// Checks the checkpoint in profile.hf_dir against profile.canonical_tensors() (names, dtypes, shapes), in canonical
/// order, then looks for tensors the profile does not model. `profile` is what profile_from_hf_config returned
/// (unscaled; raw = the config). Extra tensors are accepted only where they can be named exactly:
/// - glm4_moe / deepseek_v3 multi-token-prediction layers (config num_nextn_predict_layers = n, layers L): at
///   model.layers.<L + i> for i < n, every tensor of a MoE decoder layer as the profile lays it out plus
///   embed_tokens.weight, enorm.weight, hnorm.weight, eh_proj.weight (and eh_proj.weight_scale for fp8-channel),
///   shared_head.norm.weight and shared_head.head.weight (DeepSeek-V3 README_WEIGHTS.md "MTP Modules"; SGLang
///   models/deepseek_nextn.py and models/glm4_moe_nextn.py), all under the tensor prefix;
/// - the Kimi K2.5/K2.6 vision tower and projector of a kimi_k25 config: tensors under "vision_tower." and
///   "mm_projector." (SGLang models/kimi_k25.py KimiK25ForConditionalGeneration, whose other module is
///   language_model).
/// Throws Error naming files and tensors: what CheckpointReader throws (Missing for a directory with neither
/// model.safetensors.index.json nor model.safetensors, for a shard file the index names that is absent -- naming
/// the index and the shard -- and for an indexed tensor no shard holds -- naming the index, the tensor and the
/// shard; Format / Truncated for malformed shards), and Error(Mismatch) for the first disagreement:
///   "<shard>: tensor '<name>': expected <DTYPE> [shape] from <config.json>, found <DTYPE> [shape]",
///   "<index>: tensor '<name>' (<DTYPE> [shape] from <config.json>) is absent",
///   "<shard>: tensor '<name>' (<DTYPE> [shape]) is not part of the <family> model <config.json> describes";
/// when the disagreement involves a quantized tensor (by quant_role: weight codes, scales, packed values, on
/// either side) the message names config.json's quantization_config instead:
///   "<config.json>: field 'quantization_config' (<method>) does not match tensor '<name>' in <shard>: expected
///   ..., found ..." (and the absent / not-part-of forms likewise).
void check_hf_checkpoint(const ModelProfile& profile);

}  // namespace wsb
