#pragma once
// Wire facts of vLLM's RL endpoints shared by the client table (vllm.cpp) and `wsbench serve --protocol vllm`
// (vllm_routes.cpp). Sources, cited below by their short hash:
//   0100a21 = vllm-project/vllm@0100a2129224e729af1b3b8ed42a900cdfe9a452 (vllm/entrypoints/serve/dev/rlhf/)
//   09cb327 = vllm-project/vllm@09cb327f1183534adbdf9eee3e438688e75fbe2b (vllm/entrypoints/serve/{rpc,cache}/)
//   0888bfb = vllm-project/vllm@0888bfbe52de736b24c933c626842553a045f686 (docs/training/weight_checker.md)
// Every endpoint here needs a server started with VLLM_SERVER_DEV_MODE=1
// (vllm-project/vllm@031800765ac1:docs/training/weight_transfer/README.md, "API Endpoints").
#include <optional>
#include <string>
#include <string_view>

#include "core/pause_mode.hpp"

namespace wsb::vllm {

/// vLLM's `/pause?mode=` values (0100a21:vllm/entrypoints/serve/dev/rlhf/api_router.py:31-50): "abort" ends
/// in-flight requests now (the default), "wait" lets them finish first, "keep" freezes them until /resume, their
/// state kept; new requests are not scheduled until /resume in every mode (vllm-project/vllm@00080ee13c7a:
/// vllm/v1/engine/async_llm.py `def pause_generation`). wsbench's names for them: abort, drain, in_place.
/// nullopt for a pause mode vLLM has no counterpart of (retract: vLLM never recomputes a kept request).
std::optional<std::string_view> pause_query_value(PauseMode mode);
/// The reverse: nullopt for a value other than abort | wait | keep.
std::optional<PauseMode> pause_mode_of(std::string_view value);

/// Checksum keys of POST /weight_checker: `dp{d}:pp{p}:pcp{c}:tp{t}:[ep{e}:]{tensor}` (0888bfb: "Keys have the
/// form ..."; later sources add the `ep` field). Splits off the TP rank; another rank field stays in front of the
/// tensor name when it is not 0, so two pipeline stages of one TP rank never collide while a single-stage engine's
/// names are its tensor names. nullopt when the key has no `tp` field.
struct ChecksumKey {
  int tp = 0;
  std::string name;  ///< the tensor name, after the rank fields other than tp that are not 0
};
std::optional<ChecksumKey> split_checksum_key(std::string_view key);

}  // namespace wsb::vllm
