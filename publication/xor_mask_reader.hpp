#pragma once
// Pull-style decoding of an xor payload (one zstd frame of a mask as long as the tensor): the caller asks for the
// next bytes of the mask as it walks the tensor, so several deltas of a lineage can be advanced together over one
// chunk of the tensor (one read-modify-write of the bytes however many steps fold into them).
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace wsb {

class XorMaskReader {
 public:
  /// Checks the frame header: Error(Format) "xor mask of tensor 'T': ..." when it is not a zstd frame, declares no
  /// content size, a window beyond 128 MiB (zstd_declared_size) or a mask length other than `tensor_bytes`.
  /// `payload` must outlive the reader.
  XorMaskReader(std::span<const uint8_t> payload, uint64_t tensor_bytes, std::string tensor);
  ~XorMaskReader();
  XorMaskReader(XorMaskReader&&) noexcept;
  XorMaskReader& operator=(XorMaskReader&&) noexcept;

  /// data ^= the next data.size() bytes of the mask (bytes [position(), position() + data.size()) of it). Throws
  /// Error(Format) naming the tensor for a corrupt or truncated frame, or when the request goes past the mask's
  /// end. After a throw the reader is unusable, and `data` may hold a partially xored prefix.
  void apply(std::span<uint8_t> data);
  /// Bytes of the mask consumed so far.
  uint64_t position() const { return position_; }
  /// Once the whole mask was consumed: checks the frame ended exactly there and nothing follows it. Throws
  /// Error(Format) naming the tensor ("mask of N bytes, tensor has M bytes", "N bytes after the zstd frame", a
  /// frame that has not ended).
  void finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint64_t position_ = 0;
};

}  // namespace wsb
