#include "harness/soak_publisher.hpp"

#include "core/checksum.hpp"
#include "publisher/publisher.hpp"
#include "publication/publication.hpp"
#include "publication/store.hpp"

namespace wsb {
namespace fs = std::filesystem;

SoakPublisher::SoakPublisher(ModelProfile profile, fs::path store, uint64_t seed, DeltaEncoding encoding)
    : profile_(std::move(profile)), store_(std::move(store)), seed_(seed), encoding_(encoding) {
  PublishOptions options;
  options.store = store_;
  options.first_version = 0;
  options.last_version = 0;
  options.seed = seed_;
  options.encoding = encoding_;
  publish(profile_, options);
  tensors_ = profile_.canonical_tensors();
  for (const TensorSpec& tensor : tensors_) {
    current_.emplace_back(tensor.bytes());
    synthesize_initial(profile_, tensor, seed_, current_.back());
  }
}

uint32_t SoakPublisher::publish_next(bool identity) {
  const uint32_t version = version_ + 1;
  const PublicationManifest manifest = delta_manifest(version, encoding_);
  const Store store(store_);
  PublicationWriter writer(store.update_dir(version), manifest, 2ull << 30, /*atomic=*/true, /*fsync=*/false);
  std::vector<uint8_t> base;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    std::vector<uint8_t>& bytes = current_[i];
    base = bytes;
    if (!identity) perturb_version(profile_, tensors_[i], seed_, real_steps_ + 1, default_density(tensors_[i]), bytes);
    std::vector<uint8_t> payload = encode_delta(encoding_, base, bytes, 1);
    TensorSpec spec{tensors_[i].name, DType::U8, {static_cast<int64_t>(payload.size())}};
    writer.add(std::move(spec), std::move(payload), xxh3_128_hex(bytes));
  }
  writer.commit();
  store.advance_latest(version);
  version_ = version;
  if (!identity) ++real_steps_;
  return version;
}

void SoakPublisher::prune_before(uint32_t keep_from) const {
  const Store store(store_);
  for (uint32_t v : store.versions()) {
    if (v == 0 || v >= keep_from) continue;
    std::error_code ec;
    fs::remove_all(store.update_dir(v), ec);
  }
}

}  // namespace wsb
