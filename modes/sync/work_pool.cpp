#include "modes/sync/work_pool.hpp"

#include <algorithm>
#include <cstring>
#include <exception>

namespace wsb {

struct WorkPool::Job {
  const std::function<void(size_t)>* fn = nullptr;
  size_t pieces = 0;
  size_t next = 0;  // first piece not yet taken
  size_t done = 0;  // pieces returned (or skipped)
  std::exception_ptr error;
  std::condition_variable finished;
};

WorkPool::WorkPool(int threads) {
  for (int t = 1; t < threads; ++t) workers_.emplace_back([this] { work(); });
}

WorkPool::~WorkPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  workers_.clear();  // joins
}

bool WorkPool::take(Job& job, size_t& piece) {
  if (job.next >= job.pieces) return false;
  piece = job.next++;
  if (job.error) {  // a piece failed: the rest are skipped, counted as done
    job.done += job.pieces - piece;
    job.next = job.pieces;
  }
  if (job.next >= job.pieces) jobs_.erase(std::find(jobs_.begin(), jobs_.end(), &job));
  return !job.error;
}

void WorkPool::finish_piece(Job& job, std::exception_ptr error) {
  std::lock_guard lock(mu_);
  if (error && !job.error) job.error = std::move(error);
  if (++job.done == job.pieces) job.finished.notify_all();
}

void WorkPool::work() {
  std::unique_lock lock(mu_);
  while (true) {
    work_cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (stop_) return;
    Job& job = *jobs_.front();
    size_t piece = 0;
    if (!take(job, piece)) {
      if (job.done == job.pieces) job.finished.notify_all();
      continue;
    }
    lock.unlock();
    std::exception_ptr error;
    try {
      (*job.fn)(piece);
    } catch (...) {
      error = std::current_exception();
    }
    finish_piece(job, std::move(error));
    lock.lock();
  }
}

void WorkPool::run(size_t pieces, const std::function<void(size_t)>& fn) {
  if (pieces == 0) return;
  if (workers_.empty() || pieces == 1) {
    for (size_t i = 0; i < pieces; ++i) fn(i);
    return;
  }
  Job job;
  job.fn = &fn;
  job.pieces = pieces;
  std::unique_lock lock(mu_);
  jobs_.push_back(&job);
  work_cv_.notify_all();
  size_t piece = 0;
  while (job.next < job.pieces) {
    if (!take(job, piece)) break;
    lock.unlock();
    std::exception_ptr error;
    try {
      fn(piece);
    } catch (...) {
      error = std::current_exception();
    }
    finish_piece(job, std::move(error));
    lock.lock();
  }
  job.finished.wait(lock, [&] { return job.done == job.pieces; });
  if (job.error) std::rethrow_exception(job.error);
}

uint64_t piece_bytes(uint64_t bytes, int threads, uint64_t min_piece) {
  const uint64_t per = (bytes + 4 * static_cast<uint64_t>(std::max(threads, 1)) - 1) /
                       (4 * static_cast<uint64_t>(std::max(threads, 1)));
  return std::max<uint64_t>({per, min_piece, 1});
}

void parallel_copy(WorkPool* pool, std::span<uint8_t> dst, std::span<const uint8_t> src) {
  const uint64_t bytes = std::min(dst.size(), src.size());
  if (bytes == 0) return;
  if (pool == nullptr) {
    copy_streaming(dst.data(), src.data(), bytes);
    return;
  }
  const uint64_t piece = piece_bytes(bytes, pool->threads());
  pool->run((bytes + piece - 1) / piece, [&](size_t i) {
    const uint64_t at = i * piece;
    copy_streaming(dst.data() + at, src.data() + at, std::min(piece, bytes - at));
  });
}

}  // namespace wsb
