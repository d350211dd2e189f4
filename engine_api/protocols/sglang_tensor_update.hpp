#pragma once
// POST /update_weights_from_tensor as wsbench serve --protocol sglang answers it: refit buckets of canonical tensors
// (torch pickles, engine_api/protocols/torch_pickle.hpp) under SGLang's update locking. SGLang loads each bucket
// into the live model as it arrives; the embedded engine replaces every runtime storage in one gated commit
// (Engine::commit_canonical), so the buckets are held until every canonical tensor of the model has arrived and the
// bucket that completes the set commits them all.
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "engine_api/protocols/sglang_family_routes.hpp"
#include "engine_api/protocols/torch_pickle.hpp"

namespace wsb::sglang {

class TensorUpdates {
 public:
  explicit TensorUpdates(FamilyServer& server) : server_(server) {}

  /// {serialized_named_tensors: [base64 payload per TP rank] (required), load_format (null | "direct"), flush_cache
  /// (true), abort_all_requests (false), weight_version (str | null), ...} (modal-projects/sglang@8905cbd42,
  /// python/sglang/srt/managers/io_struct.py:1588-1608) -> {success, message} with HTTP 200, or 400 with
  /// success false (python/sglang/srt/entrypoints/http_server.py:1297-1316). Success says "Success" plus
  /// " Weight version updated to V." (python/sglang/srt/managers/tokenizer_control_mixin.py:502-505). Every
  /// entry must be the same payload (each rank of the embedded engine shards the same canonical tensors), every
  /// tensor a canonical tensor of the model with its dtype and shape; a payload SGLang's deserializer would raise on
  /// (bad base64, a pickle torch_pickle::decode refuses) fails the request here, where the real scheduler raises.
  HttpReply handle(const HttpRequest& request);

 private:
  FamilyServer& server_;
  std::mutex mu_;                                             // guards pending_
  std::map<std::string, torch_pickle::NamedTensor> pending_;  ///< tensors received since the last commit
};

}  // namespace wsb::sglang
