#pragma once
// Continuous probe traffic: one client thread sends the fixed greedy probe request back to back and records
// every response with its timing, so the profiler can check versions and fingerprints before, during and after
// an update and measure the largest gap between decode steps the client saw.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine_api/engine_client.hpp"

namespace wsb {

/// The fixed probe request: a short prompt, greedy, 8 new tokens, logprobs.
GenerateRequest probe_request();

/// One probe response as the client saw it. Times are steady_seconds().
struct ProbeSample {
  double sent = 0;
  double received = 0;
  uint32_t version = 0;
  std::string fingerprint;
  std::vector<double> step_times;
  int restarts = 0;
  /// Per output token, the version of the weights that computed it, when the engine reports it (else empty).
  std::vector<uint32_t> step_versions;
  bool aborted = false;  ///< ended by an abort pause (finish_reason "abort"): a partial answer
  std::string error;  ///< non-empty when the request failed
};

class ProbeClient {
 public:
  explicit ProbeClient(EngineClient& engine) : engine_(engine) {}
  ~ProbeClient() { stop(); }
  void start();
  /// Stops after the response in flight and joins.
  void stop();
  /// Copy of the samples so far.
  std::vector<ProbeSample> samples() const;
  /// Blocks until a response at `version` arrived or `timeout_s` passed; returns its receive time or -1.
  double wait_for_version(uint32_t version, double timeout_s, int count = 1) const;
  /// Blocks until `count` error-free responses whose request was sent after `after` (steady_seconds()) arrived;
  /// returns the last one's receive time, or -1 once `idle_timeout_s` passed without an error-free response. Waiting
  /// on responses at the target alone is not enough: requests sent before the commit returned can be served at the
  /// target (the engine switches before the client sees the commit's reply), and on a loaded host the one in flight
  /// across the commit can be the last one the probe sends.
  double wait_for_sent_after(double after, int count, double idle_timeout_s) const;

 private:
  EngineClient& engine_;
  std::atomic<bool> running_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<ProbeSample> samples_;
};

/// Largest gap in seconds between consecutive decode-step times seen across all samples.
double max_step_gap(const std::vector<ProbeSample>& samples);

}  // namespace wsb
