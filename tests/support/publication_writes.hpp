#pragma once
// FULL and DELTA publications written directly from canonical tensors held in memory, for tests that need exact
// control over the payloads and checksums a fold will read (the publisher draws its own versions).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/checksum.hpp"
#include "publication/delta_codec.hpp"
#include "publication/publication.hpp"

namespace wsb::test {

/// Canonical bytes per tensor name.
using CanonicalBytes = std::map<std::string, std::vector<uint8_t>>;

/// FULL v0 of `specs` from `tensors`, each with the xxh3-128 of its bytes.
inline void write_full_publication(const Store& store, const CanonicalBytes& tensors, const std::vector<TensorSpec>& specs) {
  PublicationManifest manifest;
  manifest.version = 0;
  PublicationWriter writer(store.update_dir(0), manifest, 1 << 20, true, false);
  for (const TensorSpec& t : specs) writer.add(t, tensors.at(t.name), xxh3_128_hex(tensors.at(t.name)));
  writer.commit();
}

/// DELTA `version` (base `version` - 1) of `specs` from `base` to `target`: one zstd frame per payload, or with
/// `frame_bytes` > 0 "zstd-frames" (encode_delta's split); each tensor's checksum is that of its target bytes
/// unless `checksums` overrides it.
inline void write_delta_publication(const Store& store, uint32_t version, DeltaEncoding encoding,
                                    const CanonicalBytes& base, const CanonicalBytes& target,
                                    const std::vector<TensorSpec>& specs,
                                    const std::map<std::string, std::string>& checksums = {},
                                    uint64_t frame_bytes = 0) {
  const PayloadFraming framing = frame_bytes > 0 ? PayloadFraming::Frames : PayloadFraming::OneFrame;
  PublicationWriter writer(store.update_dir(version), delta_manifest(version, encoding, framing), 1 << 20, true,
                           false);
  for (const TensorSpec& t : specs) {
    std::vector<uint8_t> payload = encode_delta(encoding, base.at(t.name), target.at(t.name), 1, frame_bytes);
    const TensorSpec spec{t.name, DType::U8, {static_cast<int64_t>(payload.size())}};
    const auto it = checksums.find(t.name);
    writer.add(spec, std::move(payload), it != checksums.end() ? it->second : xxh3_128_hex(target.at(t.name)));
  }
  writer.commit();
}

}  // namespace wsb::test
