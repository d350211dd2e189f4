#include "modes/refit/stream_aligner.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "modes/refit/refit_error.hpp"

namespace wsb::refit {

std::vector<std::pair<DType, std::vector<size_t>>> AlignedBatch::dtype_groups(int rank) const {
  std::vector<std::pair<DType, std::vector<size_t>>> groups;
  const auto& views = payloads[static_cast<size_t>(rank)];
  for (size_t k = 0; k < views.size(); ++k) {
    const DType d = views[k].spec->dtype;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == d; });
    if (it == groups.end()) {
      groups.emplace_back(d, std::vector<size_t>{});
      it = groups.end() - 1;
    }
    it->second.push_back(k);
  }
  return groups;
}

StreamAligner::StreamAligner(const RefitLayout& layout, Transport& transport, BufferPool& pool, ReceiveMode mode)
    : layout_(layout), transport_(transport), pool_(pool), mode_(mode) {
  check_bucket_sizes(transport.bucket_size_bytes(), pool.buffer_bytes());
  if (transport.ranks() != layout.ranks()) {
    throw Error(ErrorKind::Mismatch, fmt::format("refit: transport has {} ranks, the engine layout {}",
                                                 transport.ranks(), layout.ranks()));
  }
  const size_t per_rank = mode == ReceiveMode::Ahead ? 2 : 1;
  if (pool.count() < per_rank * static_cast<size_t>(layout.ranks())) {
    throw Error(ErrorKind::Mismatch,
                fmt::format("refit: receive buffer pool has {} buffers, {} ranks need {}{}", pool.count(),
                            layout.ranks(), per_rank * static_cast<size_t>(layout.ranks()),
                            mode == ReceiveMode::Ahead ? " (two each to receive ahead)" : ""));
  }
  streams_.resize(static_cast<size_t>(layout.ranks()));
  batch_.payloads.resize(streams_.size());
  if (mode == ReceiveMode::Ahead) {
    // Every rank's Ahead exists before the first thread starts, and each thread is handed its own: a thread that
    // looked itself up in ahead_ could read the storage a later push_back had just freed, and lock or wait on a
    // mutex and condition variable that are garbage.
    ahead_.reserve(streams_.size());
    for (size_t r = 0; r < streams_.size(); ++r) ahead_.push_back(std::make_unique<Ahead>());
    try {
      for (int r = 0; r < layout.ranks(); ++r) {
        Ahead& a = *ahead_[static_cast<size_t>(r)];
        a.thread = std::thread([this, r, &a] { receive_loop(r, a); });
      }
    } catch (...) {
      // No destructor runs after a constructor throws: the threads already started must be joined here.
      stop_receivers();
      throw;
    }
  }
}

StreamAligner::~StreamAligner() { stop_receivers(); }

void StreamAligner::stop_receivers() noexcept {
  for (size_t r = 0; r < ahead_.size(); ++r) {
    Ahead& a = *ahead_[r];
    {
      std::lock_guard lock(a.mu);
      a.stop = true;
      // A receive still running belongs to a refit that ended early: its sender must stop for it to return.
      if (a.asked && !a.ready) transport_.receiver(static_cast<int>(r)).cancel("refit: the receivers stopped");
    }
    a.cv.notify_all();
  }
  for (auto& a : ahead_) {
    if (a->thread.joinable()) a->thread.join();
  }
}

void StreamAligner::receive_loop(int rank, Ahead& a) {
  std::unique_lock lock(a.mu);
  while (true) {
    a.cv.wait(lock, [&] { return a.stop || (a.asked && !a.ready); });
    if (a.stop) return;  // a receive asked for but not begun is of a refit that ended: it never begins
    const std::span<uint8_t> into = a.buffer.span();
    lock.unlock();
    ReceivedBatch batch;
    std::exception_ptr error;
    try {
      batch = transport_.receiver(rank).receive(into);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    a.batch = std::move(batch);
    a.error = std::move(error);
    a.ready = true;
    a.cv.notify_all();
  }
}

void StreamAligner::ask(int rank) {
  Ahead& a = *ahead_[static_cast<size_t>(rank)];
  PooledBuffer buffer = pool_.acquire();
  {
    std::lock_guard lock(a.mu);
    a.buffer = std::move(buffer);
    a.asked = true;
    a.ready = false;
  }
  a.cv.notify_all();
}

ReceivedBatch StreamAligner::receive(int rank, PooledBuffer& buffer) {
  if (mode_ == ReceiveMode::Inline) {
    buffer = pool_.acquire();
    return transport_.receiver(rank).receive(buffer.span());
  }
  Ahead& a = *ahead_[static_cast<size_t>(rank)];
  if (!a.asked) ask(rank);  // the rank's first batch
  ReceivedBatch batch;
  {
    std::unique_lock lock(a.mu);
    a.cv.wait(lock, [&] { return a.ready; });
    a.asked = a.ready = false;
    buffer = std::move(a.buffer);
    if (a.error) std::rethrow_exception(std::exchange(a.error, nullptr));
    batch = std::move(a.batch);
  }
  // The batch after this one is received while this one is validated, delivered and applied.
  if (!batch.end) ask(rank);
  return batch;
}

const AlignedBatch* StreamAligner::next() {
  if (error_) throw *error_;
  if (done_) return nullptr;
  try {
    return advance();
  } catch (const Error& e) {
    error_ = e;
    for (auto& s : streams_) s.buffer.reset();
    throw;
  }
}

const AlignedBatch* StreamAligner::advance() {
  if (started_) {
    cursor_ = batch_.first_weight + batch_.names.size();
    ++batch_.sequence;
  }
  const size_t n = layout_.weights();
  for (int r = 0; r < ranks(); ++r) {
    auto& s = streams_[static_cast<size_t>(r)];
    if (s.received != cursor_) continue;  // queue not empty: keep its buffer, pull nothing
    s.buffer.reset();                     // every weight of it delivered and released: recycle
    s.entries.clear();
    if (cursor_ < n) pull(r);
  }
  if (cursor_ == n) {
    for (int r = 0; r < ranks(); ++r) confirm_end(r);
    done_ = true;
    batch_.names.clear();
    for (auto& p : batch_.payloads) p.clear();
    return nullptr;
  }
  size_t end = n;
  for (const auto& s : streams_) end = std::min(end, s.received);
  started_ = true;
  batch_.first_weight = cursor_;
  batch_.names.clear();
  for (size_t i = cursor_; i < end; ++i) batch_.names.emplace_back(layout_.name(i));
  for (int r = 0; r < ranks(); ++r) {
    auto& s = streams_[static_cast<size_t>(r)];
    auto& views = batch_.payloads[static_cast<size_t>(r)];
    views.clear();
    for (size_t i = cursor_; i < end; ++i) {
      const WireEntry& e = s.entries[i - s.first_index];
      views.push_back(WeightView{.spec = &e.spec, .bytes = s.buffer.span().subspan(e.offset, e.bytes)});
      bytes_delivered_ += e.bytes;
    }
  }
  ++batches_delivered_;
  return &batch_;
}

void StreamAligner::pull(int rank) {
  auto& s = streams_[static_cast<size_t>(rank)];
  ReceivedBatch rb = receive(rank, s.buffer);
  ++s.batches;
  if (rb.end) {
    fail_rank(ErrorKind::Missing, rank,
              fmt::format("stream ended after {} of {} weights; next expected weight '{}'", s.received,
                          layout_.weights(), layout_.name(s.received)));
  }
  if (rb.entries.empty()) {
    fail_rank(ErrorKind::Format, rank,
              fmt::format("empty transport batch #{} (next expected weight '{}')", s.batches,
                          layout_.name(s.received)));
  }
  s.first_index = s.received;
  for (const auto& e : rb.entries) {
    validate(rank, e, rb.payload_bytes);
    ++s.received;
  }
  s.entries = std::move(rb.entries);
}

void StreamAligner::validate(int rank, const WireEntry& e, uint64_t payload_bytes) {
  const size_t expected = streams_[static_cast<size_t>(rank)].received;
  const std::string& name = e.spec.name;
  const auto index = layout_.find(name);
  if (!index) fail_rank(ErrorKind::Mismatch, rank, fmt::format("unknown weight '{}' (not in the engine layout)", name));
  if (expected >= layout_.weights() || *index < expected) {
    fail_rank(ErrorKind::Mismatch, rank, fmt::format("duplicate weight '{}' (already received)", name));
  }
  if (*index > expected) {
    fail_rank(ErrorKind::Missing, rank,
              fmt::format("weight '{}' missing (the stream has '{}' in its place)", layout_.name(expected), name));
  }
  const TensorSpec& want = layout_.spec(rank, expected);
  if (e.spec.dtype != want.dtype) {
    fail_rank(ErrorKind::Mismatch, rank,
              fmt::format("weight '{}' has dtype {}, the engine layout expects {}", name, dtype_name(e.spec.dtype),
                          dtype_name(want.dtype)));
  }
  if (e.spec.shape != want.shape) {
    fail_rank(ErrorKind::Mismatch, rank,
              fmt::format("weight '{}' has shape {}, the engine layout expects {}", name, shape_string(e.spec.shape),
                          shape_string(want.shape)));
  }
  if (e.bytes != want.bytes() || e.offset > payload_bytes || e.bytes > payload_bytes - e.offset) {
    fail_rank(ErrorKind::Format, rank,
              fmt::format("weight '{}' declares {} B at offset {}, expected {} B inside the {} B received", name,
                          e.bytes, e.offset, want.bytes(), payload_bytes));
  }
}

void StreamAligner::confirm_end(int rank) {
  auto& s = streams_[static_cast<size_t>(rank)];
  ReceivedBatch rb = receive(rank, s.buffer);
  s.buffer.reset();
  if (!rb.end) {
    fail_rank(ErrorKind::Format, rank,
              fmt::format("transport batch after the last weight (first entry '{}')",
                          rb.entries.empty() ? std::string("<empty>") : rb.entries.front().spec.name));
  }
}

}  // namespace wsb::refit
