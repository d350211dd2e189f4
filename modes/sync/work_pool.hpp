#pragma once
// A fixed set of worker threads shared by every stage of a prepare that splits its work into pieces (the refit's
// receive copies, placements and bucket packing). Any number of threads may submit jobs at once; a submitting
// thread works on its own job's pieces too, so a job always progresses, even while every worker is busy with the
// pieces of other jobs, and a piece may itself never wait for another job.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "core/copy_streaming.hpp"

namespace wsb {

class WorkPool {
 public:
  /// `threads` - 1 workers (the submitting thread is the last one); threads < 1 counts as 1 (no worker: every job
  /// runs on its submitter).
  explicit WorkPool(int threads);
  /// Joins the workers. No job may be running.
  ~WorkPool();
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  /// Runs fn(i) for every i in [0, pieces) on the workers and this thread; returns once all have returned. After a
  /// piece throws, pieces not yet started are skipped and the first exception caught is rethrown.
  void run(size_t pieces, const std::function<void(size_t)>& fn);
  /// Workers plus the submitting thread.
  int threads() const { return static_cast<int>(workers_.size()) + 1; }

 private:
  struct Job;
  void work();
  /// Takes the next piece of `job` (lock held), removing the job from the queue once its last piece is taken.
  bool take(Job& job, size_t& piece);
  void finish_piece(Job& job, std::exception_ptr error);

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::deque<Job*> jobs_;
  bool stop_ = false;
  std::vector<std::jthread> workers_;
};

/// Pieces of a byte range for a pool of `threads`: at least `min_piece` bytes each (the last may be shorter), at
/// most 4 per thread, so a copy of gigabytes is shared out evenly and one of kilobytes stays whole. Returns the
/// piece length; pieces = ceil(bytes / length).
uint64_t piece_bytes(uint64_t bytes, int threads, uint64_t min_piece = uint64_t{1} << 20);

/// dst = src (equal sizes), in pieces across `pool` (null: one copy on this thread), each with copy_streaming (core/copy_streaming.hpp).
void parallel_copy(WorkPool* pool, std::span<uint8_t> dst, std::span<const uint8_t> src);

}  // namespace wsb
