#include "modes/sync/chunk_fold.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/errors.hpp"

namespace wsb {
namespace {

// Bytes advanced through every step at a time: the block stays in L2 while each step's mask or positions are
// applied to it and while it is hashed and scanned.
constexpr size_t kBlock = 1 << 18;

}  // namespace

TensorChunkFold::TensorChunkFold(const UpdatePlan& plan, const TensorSpec& spec, ExpectedChecksum expected,
                                 uint32_t version)
    : spec_(spec), expected_(std::move(expected)), version_(version), verifier_(expected_, hasher_), scanner_(spec) {
  steps_.resize(plan.steps.size());
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Publication& step = *plan.steps[i];
    const std::span<const uint8_t> payload = step.payload(spec.name);
    const PayloadFraming framing = step.manifest().framing;
    Step& s = steps_[i];
    if (step.manifest().encoding == DeltaEncoding::Xor) {
      s.is_xor = true;
      s.frames = xor_mask_frames(payload, framing, spec.bytes(), spec.name);
      s.mask.open(payload, s.frames, spec.bytes(), 0);
    } else {
      s.overwrite.decode(payload, framing, spec.bytes(), spec.name);
    }
  }
  piece_.reserve(kBlock);
}

void TensorChunkFold::apply(std::span<uint8_t> chunk) {
  const uint64_t size = spec_.bytes();
  if (chunk.size() > size - position_) {
    throw Error(ErrorKind::State, fmt::format("tensor '{}': chunk of {} bytes at offset {} runs past its {} bytes",
                                              spec_.name, chunk.size(), position_, size));
  }
  if (position_ % 8 != 0) {
    throw Error(ErrorKind::State, fmt::format("tensor '{}': chunk at offset {} does not start on a code word",
                                              spec_.name, position_));
  }
  for (size_t at = 0; at < chunk.size(); at += kBlock) apply_block(chunk.subspan(at, std::min(kBlock, chunk.size() - at)));
}

void TensorChunkFold::apply_block(std::span<uint8_t> block) {
  const uint64_t begin = position_, end = position_ + block.size();
  for (Step& s : steps_) {
    if (s.is_xor) {
      if (std::string error = s.mask.read({piece_.data(), block.size()}); !error.empty()) {
        throw_xor_mask_error(spec_.name, error);
      }
      xor_into(block.data(), piece_.data(), block.size());
      continue;
    }
    // Positions are strictly increasing (OverwriteBody::decode checked): the block's are a contiguous run from
    // `next`.
    const OverwriteBody& body = s.overwrite;
    const uint8_t* values = s.overwrite.values();
    for (; s.next < body.count() && body.position(s.next) < end; ++s.next) {
      block[body.position(s.next) - begin] = values[s.next];
    }
  }
  verifier_.update(block);
  if (!invalid_code_) {
    CodeScanner scan = scanner_;  // the block starts on a code word; a last partial word is the tensor's tail
    scan.advance(block, block.size());
    invalid_code_ = scan.found();
  }
  position_ = end;
}

void TensorChunkFold::finish(const std::function<std::vector<uint8_t>()>& final_bytes) {
  if (position_ != spec_.bytes()) {
    throw Error(ErrorKind::State, fmt::format("tensor '{}': folded {} of {} bytes", spec_.name, position_,
                                              spec_.bytes()));
  }
  for (Step& s : steps_) {
    if (!s.is_xor) continue;
    if (std::string error = s.mask.finish(); !error.empty()) throw_xor_mask_error(spec_.name, error);
  }
  verifier_.require_verified_to(spec_.bytes(), spec_.name, version_string(version_));
  // A matching checksum only proves the bytes are the publisher's: a NaN/Inf code or an E8M0 0xFF scale would still
  // reach the engine, so the codes are validated before anything live can see them.
  if (invalid_code_) {
    const std::vector<uint8_t> bytes = final_bytes();
    check_codes(spec_, bytes, fmt::format("publication {}", version_string(version_)));
  }
}

}  // namespace wsb
