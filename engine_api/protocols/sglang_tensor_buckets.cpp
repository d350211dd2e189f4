#include "engine_api/protocols/sglang_tensor_buckets.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "core/errors.hpp"
#include "engine_api/protocols/sglang_family.hpp"
#include "engine_api/protocols/torch_pickle.hpp"
#include "models/checkpoint/checkpoint.hpp"

namespace wsb::sglang {

using json = nlohmann::json;

std::vector<HttpRequest> tensor_bucket_requests(const UpdateSpec& spec) {
  const CheckpointReader checkpoint(spec.checkpoint_dir);
  const std::vector<std::string> names = checkpoint.tensor_names();
  if (names.empty()) {
    throw Error(ErrorKind::Format,
                fmt::format("{}: the checkpoint holds no tensor to send", spec.checkpoint_dir.string()));
  }
  const uint64_t limit = spec.bucket_bytes != 0 ? spec.bucket_bytes : kDefaultTensorBucketBytes;
  std::vector<std::vector<std::string>> buckets(1);
  uint64_t filled = 0;
  for (const auto& name : names) {
    const uint64_t bytes = checkpoint.entry(name).bytes();
    if (!buckets.back().empty() && filled + bytes > limit) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(name);
    filled += bytes;
  }
  std::vector<HttpRequest> requests;
  for (size_t b = 0; b < buckets.size(); ++b) {
    std::vector<torch_pickle::NamedTensor> tensors;
    for (const auto& name : buckets[b]) {
      const SafetensorsEntry& entry = checkpoint.entry(name);
      const auto data = checkpoint.data(name);
      tensors.push_back({name, entry.dtype, entry.shape, std::vector<uint8_t>(data.begin(), data.end())});
    }
    const std::string pickle = torch_pickle::encode(tensors);
    const std::string payload =
        torch_pickle::base64_encode({reinterpret_cast<const uint8_t*>(pickle.data()), pickle.size()});
    json body{
        {"serialized_named_tensors", std::vector<std::string>(static_cast<size_t>(std::max(spec.tp, 1)), payload)},
        {"flush_cache", false}};
    if (b + 1 == buckets.size()) {
      body["flush_cache"] = spec.pause != PauseMode::InPlace;
      body["weight_version"] = version_text(spec.target);
    }
    HttpRequest request{"POST", "/update_weights_from_tensor", {}, std::move(body)};
    request.timeout_s = kUpdateTimeoutS;
    requests.push_back(std::move(request));
  }
  return requests;
}

}  // namespace wsb::sglang
