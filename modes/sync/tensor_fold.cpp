#include "modes/sync/tensor_fold.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "core/errors.hpp"
#include "models/quant/code_check.hpp"
#include "publication/xor_stream.hpp"
#include "publication/zstd_frame.hpp"

namespace wsb {

namespace {

/// Segment boundaries: the frame starts every xor step shares (a segment must begin where each step's decoder can
/// begin), 64-byte aligned (no two threads write one cache line), range boundaries of a ranged checksum
/// (`range_bytes` > 0: a segment verifies its own ranges), at least kFoldMinSegmentBytes apart.
std::vector<uint64_t> segment_bounds(uint64_t size, const std::vector<std::vector<uint64_t>>& starts, bool any_xor,
                                     uint64_t range_bytes, const FoldOptions& options) {
  std::vector<uint64_t> candidates;
  if (!any_xor) {
    // Whole ranges per segment, as close to segment_bytes as they come.
    const uint64_t step = range_bytes == 0 ? std::max<uint64_t>(options.segment_bytes, 1)
                                           : std::max<uint64_t>(options.segment_bytes / range_bytes, 1) * range_bytes;
    for (uint64_t b = step; b < size; b += step) candidates.push_back(b);
  } else {
    candidates = starts.front();
    for (size_t i = 1; i < starts.size(); ++i) {
      std::vector<uint64_t> both;
      std::set_intersection(candidates.begin(), candidates.end(), starts[i].begin(), starts[i].end(),
                            std::back_inserter(both));
      candidates = std::move(both);
    }
  }
  std::vector<uint64_t> bounds{0};
  for (uint64_t b : candidates) {
    if (b == 0 || b >= size || b % 64 != 0) continue;
    if (range_bytes != 0 && b % range_bytes != 0) continue;
    if (b - bounds.back() >= options.min_segment_bytes) bounds.push_back(b);
  }
  bounds.push_back(size);
  return bounds;
}

}  // namespace

TensorFold::TensorFold(const UpdatePlan& plan, const TensorSpec& spec, std::span<uint8_t> bytes,
                       std::vector<OverwriteBody>& bodies, const FoldOptions& options)
    : spec_(spec), bytes_(bytes), chunk_(std::max<uint64_t>(options.chunk_bytes, 1)) {
  const uint64_t size = bytes.size();
  if (bodies.size() < plan.steps.size()) bodies.resize(plan.steps.size());
  std::vector<std::vector<uint64_t>> starts;
  bool any_xor = false;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Publication& step = *plan.steps[i];
    Step s;
    s.encoding = step.manifest().encoding;
    s.payload = step.payload(spec.name);
    const PayloadFraming framing = step.manifest().framing;
    if (s.encoding == DeltaEncoding::Overwrite) {
      bodies[i].decode(s.payload, framing, size, spec.name);
      s.body = &bodies[i];
    } else {
      any_xor = true;
      s.frames = xor_mask_frames(s.payload, framing, size, spec.name);
      std::vector<uint64_t> frame_starts{0};
      for (const ZstdFrameExtent& f : s.frames) frame_starts.push_back(f.content_begin);
      starts.push_back(std::move(frame_starts));
    }
    steps_.push_back(std::move(s));
  }
  for (auto& v : starts) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  expected_ = plan.steps.back()->expected_checksum(spec.name, size);
  any_xor_ = any_xor;
  bounds_ = segment_bounds(size, starts, any_xor, expected_.range_bytes(), options);
  applied_.assign(segment_count(), 0);
  suspect_.assign(segment_count(), 0);
}

void TensorFold::open_readers(FoldScratch& scratch, uint64_t begin) {
  if (scratch.readers.size() < steps_.size()) scratch.readers.resize(steps_.size());
  scratch.mask.reserve(chunk_);
  scratch.piece.reserve(chunk_);
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& st = steps_[i];
    if (st.encoding == DeltaEncoding::Xor) scratch.readers[i].open(st.payload, st.frames, bytes_.size(), begin);
  }
}

bool TensorFold::fold_segment(size_t s, FoldScratch& scratch, const FoldChunkSink& sink,
                              const std::atomic<bool>* stop) {
  const uint64_t begin = bounds_[s], end = bounds_[s + 1];
  open_readers(scratch, begin);
  std::vector<uint64_t> cursor(steps_.size(), 0);
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (steps_[i].body != nullptr) cursor[i] = steps_[i].body->lower_bound(begin);
  }
  const std::span<uint8_t> segment = bytes_.subspan(begin, end - begin);
  CodeScanner scanner(spec_);
  uint8_t* const mask = scratch.mask.data();
  uint8_t* const piece = scratch.piece.data();
  for (uint64_t at = begin; at < end; at += chunk_) {
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) return false;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk_, end - at));
    uint8_t* const data = bytes_.data() + at;
    // Every step's part of the chunk goes into `mask` (bytes to xor into the tensor) before the tensor is
    // touched: a payload failing mid-chunk leaves this chunk as it was. Overwrite-only plans cannot fail mid-chunk
    // (their bodies were validated when opened), so they write the changed bytes in place: the lines of the tensor
    // without a change are only read, never written back.
    const bool in_place = !any_xor_;
    bool first = true;
    for (size_t i = 0; i < steps_.size(); ++i) {
      Step& st = steps_[i];
      if (st.encoding == DeltaEncoding::Xor) {
        if (std::string error = scratch.readers[i].read({first ? mask : piece, n}); !error.empty()) {
          throw_xor_mask_error(spec_.name, error);
        }
        if (!first) xor_into(mask, piece, n);
      } else {
        if (first) std::memset(mask, 0, n);
        // The byte before this step is data ^ mask; the step replaces it (mask becomes data ^ value), and the
        // replaced byte goes into the body's value slot: what unfold_segment restores.
        OverwriteBody& body = *st.body;
        uint8_t* values = body.values();
        uint64_t k = cursor[i];
        for (; k < body.count(); ++k) {
          const uint64_t p = body.position(k);
          if (p >= at + n) break;
          const size_t off = static_cast<size_t>(p - at);
          if (in_place) {
            const uint8_t before = data[off];
            data[off] = values[k];
            mask[off] = static_cast<uint8_t>(mask[off] ^ before ^ values[k]);
            values[k] = before;
            continue;
          }
          const uint8_t before = static_cast<uint8_t>(data[off] ^ mask[off]);
          mask[off] = static_cast<uint8_t>(data[off] ^ values[k]);
          values[k] = before;
        }
        cursor[i] = k;
      }
      first = false;
    }
    if (!in_place) xor_into(data, mask, n);  // the one read-modify-write of the tensor's memory
    applied_[s] = at + n - begin;
    scanner.advance(segment, static_cast<size_t>(at + n - begin));
    suspect_[s] = scanner.found() ? 1 : 0;
    if (sink) sink(FoldChunk{at, at + n, bytes_, {mask, n}});
  }
  // Each reader must be exactly at the end of a frame (and, for a one-frame payload, of the payload).
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (steps_[i].encoding != DeltaEncoding::Xor) continue;
    if (std::string error = scratch.readers[i].finish(); !error.empty()) throw_xor_mask_error(spec_.name, error);
  }
  return true;
}

void TensorFold::unfold_segment(size_t s, FoldScratch& scratch) {
  const uint64_t begin = bounds_[s], end = begin + applied_[s];
  if (end == begin) return;
  open_readers(scratch, begin);
  std::vector<uint64_t> cursor(steps_.size(), 0);
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (steps_[i].body != nullptr) cursor[i] = steps_[i].body->lower_bound(begin);
  }
  uint8_t* const mask = scratch.mask.data();
  uint8_t* const piece = scratch.piece.data();
  for (uint64_t at = begin; at < end; at += chunk_) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk_, end - at));
    uint8_t* const data = bytes_.data() + at;
    // Steps backwards: mask accumulates (target ^ state before the step); an overwrite step's replaced byte is
    // the state before it, absolutely.
    std::memset(mask, 0, n);
    for (size_t i = steps_.size(); i-- > 0;) {
      Step& st = steps_[i];
      if (st.encoding == DeltaEncoding::Xor) {
        // The chunk folded, so it decodes again (immutable payload); a failure here would leave it as it is.
        if (!scratch.readers[i].read({piece, n}).empty()) return;
        xor_into(mask, piece, n);
      } else {
        OverwriteBody& body = *st.body;
        const uint8_t* values = body.values();
        uint64_t k = cursor[i];
        for (; k < body.count(); ++k) {
          const uint64_t p = body.position(k);
          if (p >= at + n) break;
          const size_t off = static_cast<size_t>(p - at);
          mask[off] = static_cast<uint8_t>(data[off] ^ values[k]);
        }
        cursor[i] = k;
      }
    }
    xor_into(data, mask, n);
  }
  applied_[s] = 0;
}

}  // namespace wsb
