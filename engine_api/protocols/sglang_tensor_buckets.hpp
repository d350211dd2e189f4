#pragma once
// The client side of upstream SGLang's refit over HTTP: the target checkpoint streamed as
// POST /update_weights_from_tensor buckets (modal-projects/sglang@8905cbd42,
// python/sglang/srt/managers/io_struct.py:1588-1608), each bucket a torch pickle of [(name, tensor), ...]
// (engine_api/protocols/torch_pickle.hpp), base64, once per TP rank.
#include <cstdint>
#include <vector>

#include "engine_api/protocols/protocol.hpp"

namespace wsb::sglang {

/// Bucket size when the cell names none (RefitSyncOptions: "at least 64 MiB").
inline constexpr uint64_t kDefaultTensorBucketBytes = 64ull << 20;

/// The requests that stream every tensor of the FULL checkpoint `spec.checkpoint_dir`, in index order, in buckets of
/// at most spec.bucket_bytes tensor bytes (a larger tensor travels alone; 0: kDefaultTensorBucketBytes):
/// {serialized_named_tensors: [payload] * spec.tp (rank r reads entry r,
/// python/sglang/srt/managers/tp_worker.py:176-184; every rank gets the whole tensors and shards them itself, as
/// Engine.update_weights_from_tensor sends one per rank, python/sglang/srt/entrypoints/engine.py:1084-1087),
/// flush_cache: false} except the last bucket, which flushes (flush_cache true unless `spec.pause` is in_place, whose
/// held requests make the flush assert) and carries weight_version str(target), so the served version moves once every
/// bucket is in ("If there are going to be more updates, set flush_cache to be false", engine.py:1077-1078). Throws the
/// checkpoint reader's errors, and Error(Format) for an empty checkpoint.
std::vector<HttpRequest> tensor_bucket_requests(const UpdateSpec& spec);

}  // namespace wsb::sglang
