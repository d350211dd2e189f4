#pragma once
// Helpers of the refit suites: synthetic per-rank shards with uneven shapes, the transports every suite runs over
// (in-process and shared memory, built by a TransportFactory), sender threads, and a hang guard (tests never assert
// on time; the guard only turns a hang into a failure). refit_run.hpp runs a whole refit and records it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/errors.hpp"
#include "modes/refit/buffer_pool.hpp"
#include "modes/refit/inproc_transport.hpp"
#include "modes/refit/receiver_group.hpp"
#include "modes/refit/refit_layout.hpp"
#include "modes/refit/sender.hpp"
#include "modes/refit/shm_transport.hpp"
#include "modes/refit/stream_aligner.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb::refit::test {

inline constexpr uint8_t kPoison = 0xA5;

/// "layers.<i>.weight"
inline std::string fmt_name(size_t i) { return "layers." + std::to_string(i) + ".weight"; }

/// Byte k of rank `rank`'s copy of weight `index`: never a constant run, so a poisoned buffer never matches.
inline uint8_t pattern_byte(int rank, size_t index, uint64_t k) {
  return static_cast<uint8_t>(rank * 61 + index * 17 + k * 3 + 1);
}

/// Per-rank shards: specs and owned bytes.
struct Shards {
  std::vector<std::vector<TensorSpec>> specs;     // [rank][weight]
  std::vector<std::vector<std::vector<uint8_t>>> data;  // [rank][weight] bytes
  std::vector<ShardWeight> weights(int rank) const {
    std::vector<ShardWeight> out;
    for (size_t i = 0; i < specs[static_cast<size_t>(rank)].size(); ++i) {
      out.push_back({specs[static_cast<size_t>(rank)][i], data[static_cast<size_t>(rank)][i]});
    }
    return out;
  }
};

/// Fills every weight with pattern_byte (or, when `fill_rank_id`, with the rank id itself).
inline Shards make_shards(std::vector<std::vector<TensorSpec>> specs, bool fill_rank_id = false) {
  Shards s;
  s.specs = std::move(specs);
  s.data.resize(s.specs.size());
  for (size_t r = 0; r < s.specs.size(); ++r) {
    for (size_t i = 0; i < s.specs[r].size(); ++i) {
      std::vector<uint8_t> bytes(s.specs[r][i].bytes());
      for (uint64_t k = 0; k < bytes.size(); ++k) {
        bytes[k] = fill_rank_id ? static_cast<uint8_t>(r) : pattern_byte(static_cast<int>(r), i, k);
      }
      s.data[r].push_back(std::move(bytes));
    }
  }
  return s;
}

/// Every rank: `weights` U8 weights of `bytes` B each (identical bucket plans on every rank).
inline std::vector<std::vector<TensorSpec>> equal_specs(int ranks, size_t weights, int64_t bytes) {
  std::vector<std::vector<TensorSpec>> specs(static_cast<size_t>(ranks));
  for (auto& rank : specs) {
    for (size_t i = 0; i < weights; ++i) rank.push_back({fmt_name(i), DType::U8, {bytes}});
  }
  return specs;
}

/// fmt_name(0) .. fmt_name(n - 1): the global weight order of n weights.
inline std::vector<std::string> names_upto(size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.push_back(fmt_name(i));
  return out;
}

/// `weights` weights over `ranks` ranks: one dtype per weight (from a mixed set), rank-dependent row counts
/// (uneven shards), every weight at most `max_bytes`.
inline std::vector<std::vector<TensorSpec>> random_specs(std::mt19937& rng, int ranks, size_t weights,
                                                         uint64_t max_bytes) {
  const DType dtypes[] = {DType::BF16, DType::F32, DType::U8, DType::F8_E4M3, DType::F16, DType::I64};
  std::vector<std::vector<TensorSpec>> specs(static_cast<size_t>(ranks));
  for (size_t i = 0; i < weights; ++i) {
    const DType d = dtypes[rng() % 6];
    const int64_t cols = 1 + static_cast<int64_t>(rng() % 16);
    const auto max_rows = std::max<int64_t>(2, static_cast<int64_t>(max_bytes / (dtype_size(d) * cols)));
    for (int r = 0; r < ranks; ++r) {
      const int64_t rows = 2 + static_cast<int64_t>(rng() % static_cast<uint64_t>(max_rows - 1));
      specs[static_cast<size_t>(r)].push_back(TensorSpec{fmt_name(i), d, {std::min(rows, max_rows), cols}});
    }
  }
  return specs;
}

/// Builds a transport of `ranks` channels for buckets of `bucket_bytes`, `depth` buckets in flight per rank.
using TransportFactory = std::function<std::unique_ptr<Transport>(int ranks, uint64_t bucket_bytes, size_t depth)>;

/// A transport kind the suites are parameterized over; `name` is the gtest parameter suffix.
struct NamedTransport {
  std::string name;
  TransportFactory make;
};

/// The in-process queue and the shared-memory ring (its endpoints used from threads of this process).
inline std::vector<NamedTransport> all_transports() {
  return {{"inproc",
           [](int ranks, uint64_t bucket, size_t depth) -> std::unique_ptr<Transport> {
             return std::make_unique<InProcTransport>(ranks, bucket, depth);
           }},
          {"shm", [](int ranks, uint64_t bucket, size_t depth) -> std::unique_ptr<Transport> {
             return std::make_unique<ShmTransport>(ranks, bucket, ShmTransportOptions{.depth = depth});
           }}};
}

/// gtest parameter name of a NamedTransport.
inline std::string transport_name(const ::testing::TestParamInfo<NamedTransport>& info) { return info.param.name; }

/// Runs `fn` on a thread; fails and exits the binary if it has not returned after `seconds` (a hang guard only).
inline void hang_guard(const std::function<void()>& fn, int seconds = 10) {
  std::packaged_task<void()> task(fn);
  auto done = task.get_future();
  std::thread t(std::move(task));
  if (done.wait_for(std::chrono::seconds(seconds)) != std::future_status::ready) {
    ADD_FAILURE() << "hang: the refit did not finish within the guard";
    std::fprintf(stderr, "refit test hang guard fired\n");
    std::_Exit(3);
  }
  t.join();
  done.get();
}

/// Starts one sender thread per rank streaming `shards` at `bucket_bytes`; join() waits for all (sender errors are
/// swallowed: the receiving side reports them).
class Senders {
 public:
  Senders(const Shards& shards, uint64_t bucket_bytes, Transport& transport) {
    for (int r = 0; r < transport.ranks(); ++r) {
      threads_.emplace_back([&shards, bucket_bytes, &transport, r] {
        const auto weights = shards.weights(r);
        try {
          stream_shard(r, weights, bucket_bytes, transport);
        } catch (const std::exception&) {
        }
      });
    }
  }
  ~Senders() { join(); }
  void join() {
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  std::vector<std::thread> threads_;
};

/// Calls fn(rank) on one thread per rank; collects each rank's Error text ("" when it returned normally).
inline std::vector<std::string> on_every_rank(int ranks, const std::function<void(int)>& fn) {
  std::vector<std::string> errors(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const Error& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace wsb::refit::test
