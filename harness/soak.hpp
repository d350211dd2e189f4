#pragma once
// `wsbench soak`: many update cycles on one pair of live engines (one disk mode, one cpu mode, same store), the
// modes alternating cycle by cycle and each mode's updates alternating real and identity deltas, with the memory
// sampler on during every prepare + commit. Every update is checked exactly (served weights must never
// be wrong or mixed): an identity update leaves bytes and fingerprint bit-identical, a real one
// changes both, the two modes agree after each pair of cycles, and at the end both equal a native load. After a
// warm-up, resident memory, the soak's page cache and open file descriptors must stay flat, compared one period of the
// pattern (4 cycles) apart.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/profile/profile.hpp"
#include "publication/delta_codec.hpp"
#include "reports/table.hpp"

namespace wsb {

struct SoakOptions {
  ModelProfile profile;
  int tp = 2;
  int cycles = 100;               ///< updates, both modes together
  int warmup = 10;                ///< first cycles left out of the flatness window (cycles >= warmup + 4)
  double max_deviation = 0.02;    ///< allowed |x - start| / start inside the window
  uint64_t seed = 0;
  DeltaEncoding encoding = DeltaEncoding::Xor;
  int prepare_threads = 2;
  std::filesystem::path workdir;  ///< absent or empty: gets the store, each engine's workdir, the final reference
  /// Called after every cycle (progress); may be empty.
  std::function<void(int cycle, int cycles)> on_cycle;
};

/// One update cycle: what it did and the readings taken once it finished (peaks: during prepare + commit).
struct SoakCycle {
  int index = 0;
  std::string mode;               ///< "disk" | "cpu"
  bool identity = false;          ///< the delta changed nothing
  uint32_t version = 0;           ///< the target
  double prepare_s = 0;
  double commit_s = 0;
  uint64_t rss_bytes = 0;         ///< resident bytes once the cycle finished
  uint64_t rss_peak_bytes = 0;    ///< sampled peak during prepare + commit
  uint64_t page_cache_bytes = 0;  ///< page cache of the soak's files (store, engine workdirs)
  std::optional<uint64_t> host_page_cache_bytes;  ///< the whole host's (not judged: shared with every process)
  uint64_t open_fds = 0;
  std::string failure;            ///< "" when the update was exact, else what differed
};

/// Flatness of one resource over the measured window.
struct SoakFigure {
  std::string resource;
  std::string unit;              ///< "bytes" | "fds"
  double start = 0;              ///< first sample of the window
  double end = 0;                ///< last sample
  double max_deviation = 0;      ///< max |x - start| / start over the window, a fraction
  bool judged = true;            ///< false: shown only (the host's page cache)
  std::string note;              ///< why it is not judged
};

/// start = samples.front(), end = samples.back(), max_deviation = max |x - start| / start (0 for an all-zero series;
/// 1 when start is 0 and another sample is not). Throws std::invalid_argument for an empty series.
SoakFigure flatness(std::string resource, std::string unit, const std::vector<double>& samples);

struct SoakResult {
  std::string model;
  int tp = 0;
  int cycles = 0;
  int warmup = 0;
  double max_deviation = 0;
  std::vector<SoakCycle> cycles_run;
  SoakCycle boot;                      ///< readings after both engines booted, before the first cycle
  std::vector<SoakFigure> figures;
  std::string reference_failure;       ///< "" when both engines equal a native load at the end
  /// True when every update was exact, the final reference matched and every judged figure stayed within the limit.
  bool passed() const;
  size_t exact_updates() const;
};

/// Runs the soak. Throws Error(Format) naming the option for cycles/warm-up/tolerance out of range, Error(State) for a
/// workdir that is not empty, and the engine's
/// or publisher's errors for a failed setup; a cycle whose update fails is recorded as that cycle's failure and the
/// soak stops there.
SoakResult run_soak(const SoakOptions& options);

/// resource | unit | start | end | max deviation (%) | limit (%) | verdict.
Table soak_table(const SoakResult& result);
/// mode | updates | prepare min–max | commit min–max.
Table soak_timing_table(const SoakResult& result);
/// Everything: options, every cycle's readings, the figures, passed.
nlohmann::json soak_json(const SoakResult& result);

}  // namespace wsb
