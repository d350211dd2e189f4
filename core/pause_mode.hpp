#pragma once
// How requests in flight are treated while a commit replaces the weights. The names are SGLang's
// (`/pause_generation` `mode`, io_struct.py:1490-1518 at modal-projects/sglang@8905cbd42) plus `drain`, the
// behaviour of an unpaused SGLang commit (it takes the model-update writer lock: requests in flight finish on the
// old weights, new ones wait; tokenizer_control_mixin.py:433-530). vLLM's `/pause?mode=` abort | wait | keep map to
// abort | drain | in_place.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wsb {

enum class PauseMode {
  Drain,    ///< no pause call: in-flight requests finish at the old version, new ones wait for the commit
  Retract,  ///< in-flight requests are requeued and recomputed from scratch at the new version
  InPlace,  ///< in-flight requests keep their KV and continue on the new weights (a response may span versions)
  Abort,    ///< in-flight requests end now with finish_reason "abort"
};

/// "drain" | "retract" | "in_place" | "abort".
std::string_view name_of(PauseMode mode);
/// nullopt for an unknown name.
std::optional<PauseMode> parse_pause_mode(std::string_view name);
/// Every pause mode, in declaration order.
const std::vector<PauseMode>& all_pause_modes();

}  // namespace wsb
