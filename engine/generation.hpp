#pragma once
// Generation requests/responses of the engine (the fields of the SGLang-fork /generate API the harness uses)
// and the probe fingerprint.
#include <cstdint>
#include <string>
#include <vector>

namespace wsb {

/// Greedy generation request. `input_ids` from tokenize_bytes(prompt).
struct GenerateRequest {
  std::vector<int32_t> input_ids;
  int max_new_tokens = 8;
  bool return_logprob = true;
};

/// Greedy generation result. Under the retract and drain pause modes every token was computed at `weight_version`
/// (a commit during generation restarts the request at the new version); under in_place a response may span two
/// versions, which `step_versions` shows. `step_times` are steady_seconds() at the end of every forward step of
/// this request (prefill included, kept across restarts, so the client sees the stall).
struct GenerateResponse {
  std::vector<int32_t> output_ids;
  std::string text;
  std::vector<float> logprobs;  ///< log-softmax of each chosen token (natural log), empty unless requested
  uint32_t weight_version = 0;  ///< version of the weights that computed the last token (SGLang reads it per chunk)
  /// Per forward step of this request, prompt (prefill) steps first, then one per output token: the version of the
  /// weights that computed it, stamped at the step, not at completion. A response whose prompt was computed before
  /// an in_place commit and whose tokens after it spans two versions here even when every output token is new.
  std::vector<uint32_t> step_versions;
  std::string finish_reason = "length";  ///< "length" (max_new_tokens reached) | "abort" (ended by a pause)
  std::vector<double> step_times;
  int restarts = 0;  ///< times the request was restarted by a commit
};

/// Fingerprint of a response: xxh3-128 hex over (token ids as little-endian int32, detokenized text bytes,
/// logprob float32 bit patterns), each part length-prefixed so parts cannot alias.
std::string fingerprint(const std::vector<int32_t>& output_ids, const std::string& text,
                        const std::vector<float>& logprobs);
inline std::string fingerprint(const GenerateResponse& response) {
  return fingerprint(response.output_ids, response.text, response.logprobs);
}

}  // namespace wsb
