#include "modes/sync/delta_recorder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/cpu_features.hpp"

#ifdef WSBENCH_AVX512_DISPATCH
// GCC 12 reports its own _mm512_undefined_* placeholders (behind the casts, widenings and reductions) as maybe
// uninitialized where they are inlined; the state of a warning follows the header's lines, so it is set around the
// include.
#if defined(__GNUC__) && !defined(__clang__)  // clang has no such warning, and -Werror refuses an unknown group
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif
#endif

#include "core/copy_streaming.hpp"
#include "core/digest64.hpp"
#include "core/errors.hpp"
#include "core/line_compare.hpp"
#include "modes/sync/rank_image.hpp"
#include "modes/sync/staged_delta.hpp"

namespace wsb {
namespace {

/// Copies into a dense storage from one page up stream their stores.
constexpr size_t kDenseStreamingMinBytes = 4096;

uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

/// The little-endian word of `n` <= 8 bytes at `p`, zero-padded (digest64's last word).
uint64_t load_padded(const uint8_t* p, uint64_t n) {
  uint64_t v = 0;
  std::memcpy(&v, p, n);
  return v;
}

/// Recordings of every recorder get distinct numbers, so a thread's cached state is never taken for another's.
std::atomic<uint64_t> g_generation{0};

struct ThreadSlot {
  uint64_t generation = 0;
  void* state = nullptr;
};
thread_local ThreadSlot t_slot;

/// Entries a writer counts locally before adding them to its storage's total (and checking the dense limit).
constexpr uint64_t kFlushEntries = 1024;
/// A storage turns dense early once 1/kProjectAfter of it is written and its changes so far, projected over its
/// size, pass kProjectMargin times its cap.
constexpr uint64_t kProjectAfter = 16;
constexpr double kProjectMargin = 2.0;

#ifdef WSBENCH_AVX512_DISPATCH
/// digest64_term of each lane's word, at word index `index` + lane (core/digest64_terms.hpp, eight at a time).
__attribute__((target("avx512f,avx512dq"))) inline __m512i digest64_terms8(__m512i words, uint64_t index) {
  const __m512i lane = _mm512_set_epi64(8, 7, 6, 5, 4, 3, 2, 1);  // index + 1 of each lane, less `index`
  __m512i z = _mm512_xor_si512(
      words, _mm512_mullo_epi64(_mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(index)), lane),
                                _mm512_set1_epi64(static_cast<long long>(0x9E3779B97F4A7C15ull))));
  z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)),
                         _mm512_set1_epi64(static_cast<long long>(0xBF58476D1CE4E5B9ull)));
  z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)),
                         _mm512_set1_epi64(static_cast<long long>(0x94D049BB133111EBull)));
  return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

/// The eight 64-bit lanes added modulo 2^64. Not _mm512_reduce_add_epi64: GCC's header adds the lanes as signed
/// long long, an overflow UBSan reports for digest terms (whose sums are meant to wrap).
__attribute__((target("avx512f,avx512dq"))) inline uint64_t lane_sum(__m512i v) {
  const __m256i a = _mm256_add_epi64(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  const __m128i b = _mm_add_epi64(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  return static_cast<uint64_t>(_mm_cvtsi128_si64(b)) + static_cast<uint64_t>(_mm_extract_epi64(b, 1));
}
#endif

struct Segment {
  size_t flat = 0;
  uint64_t first = 0;  ///< slot
  uint64_t count = 0;
  int group = 0;
};

struct Deferred {
  size_t flat = 0;
  uint64_t word = 0;  ///< 64-bit word index in the storage
  uint64_t mask = 0;  ///< old ^ new of the bytes one write covered
};


}  // namespace

struct DeltaRecorder::Group {
  HostBuffer buffer;
  uint64_t budget = 0;
  uint64_t limit = 0;  ///< blocks are claimed below it; the rest is room for the table
  uint64_t block = 0;  ///< bytes per claim
  std::atomic<uint64_t> cursor{kPackHeaderBytes};
  std::atomic<bool> overflow{false};
  uint64_t entry_sum = 0;  ///< digest64 terms of every slot (set by finish)
  uint64_t slots = 0;
};

struct DeltaRecorder::StorageState {
  std::atomic<uint64_t> delta{0};
  std::atomic<uint64_t> changed{0};
  std::atomic<uint64_t> entries{0};
  std::atomic<uint64_t> covered{0};
  std::atomic<uint64_t> found{0};  ///< changed 32-bit words found, staged or not (the dense test counts these)
  std::atomic<bool> dense{false};
  uint64_t cap = 0;  ///< most entries before the storage counts as dense
};

struct DeltaRecorder::ThreadState {
  struct Block {
    uint64_t next = 0, end = 0;  ///< byte offsets in the group's pack
    uint64_t sum = 0;            ///< digest64 terms of the entries this thread wrote in the group
  };
  std::vector<Block> blocks;  ///< by group
  std::vector<Segment> segments;
  Segment open;
  bool has_open = false;
  std::vector<Deferred> deferred;

  void reset(size_t groups) {
    blocks.assign(groups, Block{});
    segments.clear();
    has_open = false;
    deferred.clear();
  }
  void close_open() {
    if (has_open && open.count > 0) segments.push_back(open);
    has_open = false;
  }
};

/// One thread's writes to one storage: counts locally, publishes in flush().
class DeltaRecorder::Writer {
 public:
  Writer(DeltaRecorder& r, ThreadState& t, size_t flat)
      : r_(r), t_(t), flat_(flat), state_(r.states_[flat]), group_(r.storages_[flat].group),
        size_(r.storages_[flat].image.size()) {
    staging_ = stageable() && !state_.dense.load(std::memory_order_relaxed);
  }

  /// 64-bit word `w` changed from `old_word` to `new_word` (zero-padded past the storage's end).
  void word(uint64_t w, uint64_t old_word, uint64_t new_word) {
    ++changed_;
    delta_ += digest64_term(new_word, w) - digest64_term(old_word, w);
    const uint64_t x = old_word ^ new_word;
    const bool low = static_cast<uint32_t>(x) != 0 && 8 * w + 4 <= size_;
    const bool high = (x >> 32) != 0 && 8 * w + 8 <= size_;
    found_ += static_cast<uint64_t>(low) + static_cast<uint64_t>(high);
    if (low && staging_) emit(2 * w, static_cast<uint32_t>(new_word));
    if (high && staging_) emit(2 * w + 1, static_cast<uint32_t>(new_word >> 32));
    if (found_ >= kFlushEntries) flush_entries();
  }

  /// The eight whole words [w, w + 8) (inside the storage), of which those whose 32-bit halves are set in `halves`
  /// (bit 2k + h: half h of word w + k) changed from `old_words` to `new_words`. Loops over set bits only: at
  /// sparse densities the changes are scattered, and a branch per word would mispredict on most of them.
  void block(uint64_t w, const uint64_t* old_words, const uint64_t* new_words, uint32_t halves) {
    for (uint32_t words = (halves | halves >> 1) & 0x5555; words != 0; words &= words - 1) {
      const int k = std::countr_zero(words) / 2;
      ++changed_;
      delta_ += digest64_term(new_words[k], w + k) - digest64_term(old_words[k], w + k);
    }
    const int count = std::popcount(halves);
    found_ += static_cast<uint64_t>(count);
    if (staging_) stage_block(w, new_words, halves, count);
    if (found_ >= kFlushEntries) flush_entries();
  }

  /// The whole line of words [w, w + 8) (inside the storage): compares `old_line` with `new_line`, writes the new
  /// line to `image_line` when any byte differs and records its changes as block() does. Returns whether it
  /// differed.
  bool line(uint64_t w, const uint8_t* old_line, const uint8_t* new_line, uint8_t* image_line) {
#ifdef WSBENCH_AVX512_DISPATCH
    if (cpu_has_avx512()) return line_avx512(w, old_line, new_line, image_line);
#endif
    uint64_t o[8], v[8], any = 0;
    for (int k = 0; k < 8; ++k) {
      o[k] = load64(old_line + 8 * k);
      v[k] = load64(new_line + 8 * k);
      any |= o[k] ^ v[k];
    }
    if (any == 0) return false;
    uint32_t halves = 0;
    for (int k = 0; k < 8; ++k) {
      const uint64_t x = o[k] ^ v[k];
      halves |= static_cast<uint32_t>(static_cast<uint32_t>(x) != 0) << (2 * k);
      halves |= static_cast<uint32_t>((x >> 32) != 0) << (2 * k + 1);
    }
    std::memcpy(image_line, new_line, 64);
    block(w, o, v, halves);
    return true;
  }

  void flush() {
    flush_entries();
    if (changed_ != 0) state_.changed.fetch_add(changed_, std::memory_order_relaxed);
    if (delta_ != 0) state_.delta.fetch_add(delta_, std::memory_order_relaxed);
    changed_ = delta_ = 0;
  }

  /// The storage turned dense (seen by this writer's last flush): its remaining writes need no comparing.
  bool dense() const { return dense_; }

 private:
#ifdef WSBENCH_AVX512_DISPATCH
  /// line() with AVX-512: the line's 32-bit halves compared in one instruction, the changed words' digest terms
  /// computed eight at a time, and the changed halves' pack entries compressed into the thread's block with two
  /// masked stores. At 1% of BF16 values moved a quarter of all lines change, and the scalar form's loops over their
  /// set bits (one digest term and one branch each) cost four times a memory pass.
  __attribute__((target("avx512f,avx512dq"))) bool line_avx512(uint64_t w, const uint8_t* old_line,
                                                                const uint8_t* new_line, uint8_t* image_line) {
    const __m512i o = _mm512_loadu_si512(old_line);
    const __m512i v = _mm512_loadu_si512(new_line);
    const __mmask16 halves = _mm512_cmpneq_epi32_mask(o, v);
    if (halves == 0) return false;
    _mm512_storeu_si512(image_line, v);
    const __mmask8 words = _mm512_cmpneq_epi64_mask(o, v);
    const __m512i change = _mm512_maskz_sub_epi64(words, digest64_terms8(v, w), digest64_terms8(o, w));
    delta_ += lane_sum(change);
    changed_ += static_cast<uint64_t>(std::popcount(static_cast<unsigned>(words)));
    const int count = std::popcount(static_cast<unsigned>(halves));
    found_ += static_cast<uint64_t>(count);
    if (staging_) {
      Group& g = *r_.groups_[static_cast<size_t>(group_)];
      ThreadState::Block& b = t_.blocks[static_cast<size_t>(group_)];
      const bool fast = t_.has_open && t_.open.flat == flat_ && t_.open.count + static_cast<uint64_t>(count) <= kSegmentEntries &&
                        b.next + 8 * static_cast<uint64_t>(count) <= b.end &&
                        kPackHeaderBytes + 8 * (t_.open.first + t_.open.count) == b.next;
      if (fast) {
        // Entry of 32-bit half j: its index 2w + j in the low half, its new value in the high half (pack_entry).
        const __m512i index = _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(2 * w)),
                                               _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0));
        const __m512i low = _mm512_or_si512(
            index, _mm512_slli_epi64(_mm512_cvtepu32_epi64(_mm512_castsi512_si256(v)), 32));
        const __m512i high = _mm512_or_si512(_mm512_add_epi64(index, _mm512_set1_epi64(8)),
                                             _mm512_slli_epi64(_mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(v, 1)), 32));
        const auto low_mask = static_cast<__mmask8>(halves & 0xFF);
        const auto high_mask = static_cast<__mmask8>(halves >> 8);
        const int low_count = std::popcount(static_cast<unsigned>(low_mask));
        const int high_count = count - low_count;
        // Compressed in registers and stored masked: a compressing store to memory is microcoded on some CPUs.
        const __m512i low_entries = _mm512_maskz_compress_epi64(low_mask, low);
        const __m512i high_entries = _mm512_maskz_compress_epi64(high_mask, high);
        uint8_t* out = g.buffer.data() + b.next;
        const uint64_t slot = b.next / 8;
        const auto low_keep = static_cast<__mmask8>((1u << low_count) - 1);
        const auto high_keep = static_cast<__mmask8>((1u << high_count) - 1);
        _mm512_mask_storeu_epi64(out, low_keep, low_entries);
        _mm512_mask_storeu_epi64(out + 8 * low_count, high_keep, high_entries);
        const __m512i sums = _mm512_add_epi64(
            _mm512_maskz_mov_epi64(low_keep, digest64_terms8(low_entries, slot)),
            _mm512_maskz_mov_epi64(high_keep, digest64_terms8(high_entries, slot + static_cast<uint64_t>(low_count))));
        b.sum += lane_sum(sums);
        b.next += 8 * static_cast<uint64_t>(count);
        t_.open.count += static_cast<uint64_t>(count);
        pending_ += static_cast<uint64_t>(count);
      } else {
        alignas(64) uint64_t values[8];
        _mm512_store_si512(values, v);
        stage_block(w, values, halves, count);
      }
    }
    if (found_ >= kFlushEntries) flush_entries();
    return true;
  }
#endif

  /// Its entries can go in a pack: word-addressable, and its area's pack has room.
  bool stageable() const {
    return group_ >= 0 && !r_.groups_[static_cast<size_t>(group_)]->overflow.load(std::memory_order_relaxed);
  }

  void stage_block(uint64_t w, const uint64_t* new_words, uint32_t halves, int count) {
    Group& g = *r_.groups_[static_cast<size_t>(group_)];
    ThreadState::Block& b = t_.blocks[static_cast<size_t>(group_)];
    const bool fast = t_.has_open && t_.open.flat == flat_ && t_.open.count + count <= kSegmentEntries &&
                      b.next + 8 * static_cast<uint64_t>(count) <= b.end &&
                      kPackHeaderBytes + 8 * (t_.open.first + t_.open.count) == b.next;
    if (!fast) {
      for (; halves != 0 && staging_; halves &= halves - 1) {
        const int bit = std::countr_zero(halves);
        emit(2 * w + static_cast<uint64_t>(bit), static_cast<uint32_t>(new_words[bit / 2] >> (32 * (bit % 2))));
      }
      return;
    }
    uint8_t* out = g.buffer.data() + b.next;
    uint64_t slot_word = b.next / 8, sum = 0;
    for (; halves != 0; halves &= halves - 1) {
      const int bit = std::countr_zero(halves);
      const uint64_t entry = pack_entry(static_cast<uint32_t>(2 * w + static_cast<uint64_t>(bit)),
                                        static_cast<uint32_t>(new_words[bit / 2] >> (32 * (bit % 2))));
      std::memcpy(out, &entry, 8);
      out += 8;
      sum += digest64_term(entry, slot_word++);
    }
    b.sum += sum;
    b.next += 8 * static_cast<uint64_t>(count);
    t_.open.count += static_cast<uint64_t>(count);
    pending_ += static_cast<uint64_t>(count);
  }

  void emit(uint64_t word, uint32_t value) {
    Group& g = *r_.groups_[static_cast<size_t>(group_)];
    ThreadState::Block& b = t_.blocks[static_cast<size_t>(group_)];
    const bool continues = t_.has_open && t_.open.flat == flat_ && t_.open.count < kSegmentEntries &&
                           b.next < b.end && kPackHeaderBytes + 8 * (t_.open.first + t_.open.count) == b.next;
    if (!continues) {
      t_.close_open();
      if (b.next == b.end) {
        const uint64_t at = g.cursor.fetch_add(g.block, std::memory_order_relaxed);
        if (at + g.block > g.limit) {
          g.overflow.store(true, std::memory_order_relaxed);
          staging_ = false;
          return;
        }
        b.next = at;
        b.end = at + g.block;
      }
      t_.open = Segment{flat_, (b.next - kPackHeaderBytes) / 8, 0, group_};
      t_.has_open = true;
    }
    const uint64_t entry = pack_entry(static_cast<uint32_t>(word), value);
    std::memcpy(g.buffer.data() + b.next, &entry, 8);
    b.sum += digest64_term(entry, b.next / 8);
    b.next += 8;
    ++t_.open.count;
    ++pending_;
  }

  void flush_entries() {
    if (found_ == 0) return;
    if (pending_ != 0) state_.entries.fetch_add(pending_, std::memory_order_relaxed);
    const uint64_t total = state_.found.fetch_add(found_, std::memory_order_relaxed) + found_;
    pending_ = found_ = 0;
    // Dense: its entries would pass the cap, or it can never be staged (any change then means a full copy). Its
    // writes from here on are plain copies, and its digest comes from its new bytes.
    if (total > state_.cap || !stageable() || projected_dense(total)) state_.dense.store(true, std::memory_order_relaxed);
    if (state_.dense.load(std::memory_order_relaxed)) {
      dense_ = true;
      staging_ = false;
    }
  }

  /// Changes found in a large enough part of the storage already run at over twice the density the cap allows:
  /// comparing on until the cap is passed (a quarter of the storage when every word changes) would only cost time.
  /// `covered` counts ranges as they start, so the density seen errs low. A storage whose changes cluster in its
  /// first part may be copied in full where it could have been staged; never wrongly staged.
  bool projected_dense(uint64_t total) const {
    const uint64_t covered = state_.covered.load(std::memory_order_relaxed);
    return covered >= size_ / kProjectAfter &&
           static_cast<double>(total) * static_cast<double>(size_) >
               kProjectMargin * static_cast<double>(state_.cap) * static_cast<double>(covered);
  }

  DeltaRecorder& r_;
  ThreadState& t_;
  size_t flat_;
  StorageState& state_;
  int group_;
  uint64_t size_;
  bool staging_ = false;
  bool dense_ = false;
  uint64_t changed_ = 0, delta_ = 0;
  uint64_t found_ = 0;    ///< changed 32-bit words not yet added to the storage's count
  uint64_t pending_ = 0;  ///< of them, entries written to the pack
};

DeltaRecorder::DeltaRecorder(std::vector<uint64_t> budgets, const HostPinner* pinner)
    : finisher_(std::make_unique<ThreadState>()) {
  for (uint64_t budget : budgets) {
    auto g = std::make_unique<Group>();
    g->budget = std::max<uint64_t>(budget, 4096) / 8 * 8;
    g->buffer = HostBuffer(g->budget, kImageAlignment, pinner);
    // An eighth stays free for the table: at ~1,300 entries per segment it needs ~3% of the entries' bytes.
    g->limit = g->budget - g->budget / 8;
    g->block = std::clamp<uint64_t>((g->limit - kPackHeaderBytes) / 64, 512, 256 << 10) / 8 * 8;
    groups_.push_back(std::move(g));
  }
}

DeltaRecorder::~DeltaRecorder() = default;

void DeltaRecorder::begin(std::vector<DeltaStorage> storages) {
  for (DeltaStorage& s : storages) {
    if (s.group >= static_cast<int>(groups_.size())) {
      throw Error(ErrorKind::Mismatch, fmt::format("delta recorder: staging group {} of {}", s.group, groups_.size()));
    }
    // Pack entries address 32-bit words with u32 indices.
    if (s.image.size() % 4 != 0 || s.image.size() / 4 > UINT32_MAX) s.group = -1;
  }
  storages_ = std::move(storages);
  states_ = std::make_unique<StorageState[]>(storages_.size());
  for (size_t i = 0; i < storages_.size(); ++i) {
    states_[i].cap = static_cast<uint64_t>(kDenseLimit * static_cast<double>(storages_[i].image.size()) / 8);
  }
  for (auto& g : groups_) {
    g->cursor = kPackHeaderBytes;
    g->overflow = false;
    g->entry_sum = 0;
    g->slots = 0;
  }
  std::lock_guard lock(mu_);
  generation_ = ++g_generation;
  active_.clear();
  used_threads_ = 0;
  finished_ = false;
}

DeltaRecorder::ThreadState& DeltaRecorder::thread_state() {
  if (t_slot.generation == generation_) return *static_cast<ThreadState*>(t_slot.state);
  std::lock_guard lock(mu_);
  const auto id = std::this_thread::get_id();
  ThreadState* state = nullptr;
  for (const auto& [tid, s] : active_) {
    if (tid == id) state = s;
  }
  if (state == nullptr) {
    if (used_threads_ == threads_.size()) threads_.push_back(std::make_unique<ThreadState>());
    state = threads_[used_threads_++].get();
    state->reset(groups_.size());
    active_.emplace_back(id, state);
  }
  t_slot = ThreadSlot{generation_, state};
  return *state;
}

void DeltaRecorder::copy(size_t flat, uint64_t offset, std::span<const uint8_t> src) {
  const uint8_t* other = src.data();
  const uint64_t bytes = src.size();
  if (flat >= storages_.size()) {
    throw Error(ErrorKind::Mismatch, fmt::format("delta recorder: storage {} of {}", flat, storages_.size()));
  }
  uint8_t* image = storages_[flat].image.data();
  const uint64_t n = storages_[flat].image.size();
  if (offset > n || bytes > n - offset) {
    throw Error(ErrorKind::Mismatch, fmt::format("delta recorder: bytes [{}, {}) of storage {} beyond its {} bytes",
                                                 offset, offset + bytes, flat, n));
  }
  if (bytes == 0) return;
  states_[flat].covered.fetch_add(bytes, std::memory_order_relaxed);
  ThreadState& t = thread_state();
  const uint64_t a = offset, b = offset + bytes;
  if (states_[flat].dense.load(std::memory_order_relaxed)) {
    record_dense(flat, a, b, other);
    return;
  }
  Writer writer(*this, t, flat);
  // `other` holds the new bytes; the image the old ones.
  auto old_at = [&](uint64_t p) { return image + p; };
  auto new_at = [&](uint64_t p) { return other + (p - a); };
  // Bytes [lo, hi) of word w, which this range does not cover whole: only its own bytes are read or written.
  auto partial = [&](uint64_t w, uint64_t lo, uint64_t hi) {
    uint64_t mask = 0;
    for (uint64_t p = lo; p < hi; ++p) {
      const uint8_t x = static_cast<uint8_t>(*old_at(p) ^ *new_at(p));
      image[p] = *new_at(p);
      mask |= static_cast<uint64_t>(x) << (8 * (p - 8 * w));
    }
    if (mask != 0) t.deferred.push_back(Deferred{flat, w, mask});
  };
  // Word w whose bytes [8w, min(8w + 8, n)) all lie in the range.
  auto whole = [&](uint64_t w) {
    const uint64_t k = std::min<uint64_t>(8, n - 8 * w);
    const uint64_t o = k == 8 ? load64(old_at(8 * w)) : load_padded(old_at(8 * w), k);
    const uint64_t v = k == 8 ? load64(new_at(8 * w)) : load_padded(new_at(8 * w), k);
    if (o == v) return;
    std::memcpy(image + 8 * w, new_at(8 * w), k);
    writer.word(w, o, v);
  };
  uint64_t w = a / 8;
  if (a % 8 != 0) {
    partial(w, a, std::min(8 * w + 8, b));
    ++w;
    if (8 * w >= b) {
      writer.flush();
      return;
    }
  }
  const uint64_t whole_end = b / 8;  // words [w, whole_end) end inside the range
  // Eight words (a 64-byte line) at a time: most lines of a sparse delta hold no change, and then nothing is
  // written.
  while (w + 8 <= whole_end) {
    const size_t lines = static_cast<size_t>((whole_end - w) / 8);
    const size_t same = first_differing_line(old_at(8 * w), new_at(8 * w), lines);
    w += 8 * same;
    if (same == lines) break;
    writer.line(w, old_at(8 * w), new_at(8 * w), image + 8 * w);
    w += 8;
    if (writer.dense()) {
      // The rest of the range is written as the storage's other writes now are.
      writer.flush();
      if (8 * w < b) record_dense(flat, 8 * w, b, other + (8 * w - a));
      return;
    }
  }
  for (; w < whole_end; ++w) whole(w);
  if (b % 8 != 0) {  // word b / 8, which the range enters
    if (b == n) whole(w);  // the storage's last, short word
    else partial(w, 8 * w, b);
  }
  writer.flush();
}

void DeltaRecorder::record_dense(size_t flat, uint64_t a, uint64_t b, const uint8_t* src) {
  // The storage is copied in full and digested from its new bytes after the commit (DeltaChanges::dense): its
  // writes are plain copies, streamed past the caches (the image is read next by the upload's DMA, not by this core).
  copy_streaming(storages_[flat].image.data() + a, src, b - a, kDenseStreamingMinBytes);
}

std::vector<DeltaChanges> DeltaRecorder::finish() {
  std::lock_guard lock(mu_);
  ThreadState& fin = *finisher_;
  fin.reset(groups_.size());
  // Words that two writes shared: their bytes' xors together are the whole word's, and the image is final now.
  std::vector<Deferred> deferred;
  for (const auto& [tid, s] : active_) deferred.insert(deferred.end(), s->deferred.begin(), s->deferred.end());
  std::sort(deferred.begin(), deferred.end(),
            [](const Deferred& x, const Deferred& y) { return x.flat != y.flat ? x.flat < y.flat : x.word < y.word; });
  for (size_t i = 0; i < deferred.size();) {
    const size_t flat = deferred[i].flat;
    Writer writer(*this, fin, flat);
    const uint8_t* image = storages_[flat].image.data();
    const uint64_t n = storages_[flat].image.size();
    while (i < deferred.size() && deferred[i].flat == flat) {
      const uint64_t w = deferred[i].word;
      uint64_t mask = 0;
      for (; i < deferred.size() && deferred[i].flat == flat && deferred[i].word == w; ++i) mask |= deferred[i].mask;
      const uint64_t v = load_padded(image + 8 * w, std::min<uint64_t>(8, n - 8 * w));
      writer.word(w, v ^ mask, v);
    }
    writer.flush();
  }
  std::vector<ThreadState*> all{&fin};
  for (const auto& [tid, s] : active_) all.push_back(s);
  for (ThreadState* s : all) s->close_open();
  for (size_t g = 0; g < groups_.size(); ++g) {
    Group& group = *groups_[g];
    if (group.overflow) continue;
    uint64_t sum = 0;
    for (ThreadState* s : all) {
      ThreadState::Block& b = s->blocks[g];
      sum += b.sum;
      // The unused tail of a thread's last block travels with the pack: zero, and digested as such.
      if (b.next < b.end) std::memset(group.buffer.data() + b.next, 0, b.end - b.next);
      for (uint64_t p = b.next; p < b.end; p += 8) sum += digest64_term(0, p / 8);
      b.next = b.end;
    }
    group.entry_sum = sum;
    group.slots = (group.cursor.load() - kPackHeaderBytes) / 8;
  }
  finished_ = true;
  std::vector<DeltaChanges> out(storages_.size());
  for (size_t i = 0; i < storages_.size(); ++i) {
    const StorageState& st = states_[i];
    out[i].digest_delta = st.delta.load();
    out[i].changed_words = st.changed.load();
    out[i].entries = st.entries.load();
    out[i].covered_bytes = st.covered.load();
    out[i].incomplete = storages_[i].group < 0 || st.dense.load() || groups_[storages_[i].group]->overflow.load();
    out[i].dense = st.dense.load();
  }
  return out;
}

std::optional<RecordedPack> DeltaRecorder::pack(int g, const std::vector<bool>& include) {
  std::lock_guard lock(mu_);
  if (!finished_ || g < 0 || static_cast<size_t>(g) >= groups_.size()) {
    throw Error(ErrorKind::State, fmt::format("delta recorder: pack of group {} before finish or out of range", g));
  }
  Group& group = *groups_[static_cast<size_t>(g)];
  if (group.overflow) return std::nullopt;
  std::vector<const Segment*> segments;
  std::vector<const ThreadState*> all{finisher_.get()};
  for (const auto& [tid, s] : active_) all.push_back(s);
  for (const ThreadState* s : all) {
    for (const Segment& seg : s->segments) {
      // A dense storage stopped recording part way: its entries are incomplete, so it never goes in a pack.
      if (seg.group == g && seg.flat < include.size() && include[seg.flat] && !states_[seg.flat].dense.load()) {
        segments.push_back(&seg);
      }
    }
  }
  const uint64_t bytes = pack_bytes(segments.size(), group.slots);
  if (bytes > group.budget) return std::nullopt;
  uint8_t* p = group.buffer.data();
  const uint64_t header[2] = {segments.size(), group.slots};
  std::memcpy(p, header, sizeof header);
  uint64_t sum = group.entry_sum + digest64_term(header[0], 0) + digest64_term(header[1], 1);
  uint64_t at = kPackHeaderBytes + 8 * group.slots;
  for (const Segment* seg : segments) {
    const uint64_t record[4] = {storages_[seg->flat].address, seg->first, seg->count, storages_[seg->flat].image.size()};
    std::memcpy(p + at, record, sizeof record);
    for (uint64_t k = 0; k < 4; ++k) sum += digest64_term(record[k], at / 8 + k);
    at += kPackSegmentBytes;
  }
  return RecordedPack{{p, bytes}, digest64_close(sum, bytes), segments.size(), group.slots};
}

uint64_t DeltaRecorder::held_bytes() const {
  std::lock_guard lock(mu_);
  uint64_t total = 0;
  for (const auto& g : groups_) total += g->buffer.size();
  return total;
}

}  // namespace wsb
