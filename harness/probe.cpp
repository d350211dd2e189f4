#include "harness/probe.hpp"

#include <algorithm>
#include <chrono>

#include "core/phase_log.hpp"
#include "models/forward/forward.hpp"

namespace wsb {

GenerateRequest probe_request() {
  GenerateRequest request;
  request.input_ids = tokenize_bytes("wsbench probe: the weights must be exact.");
  request.max_new_tokens = 8;
  request.return_logprob = true;
  return request;
}

void ProbeClient::start() {
  running_ = true;
  thread_ = std::thread([this] {
    const GenerateRequest request = probe_request();
    while (running_) {
      ProbeSample sample;
      sample.sent = steady_seconds();
      try {
        GenerateResponse response = engine_.generate(request);
        sample.version = response.weight_version;
        sample.fingerprint = fingerprint(response);
        sample.step_times = std::move(response.step_times);
        sample.restarts = response.restarts;
        sample.step_versions = std::move(response.step_versions);
        sample.aborted = response.finish_reason == "abort";
      } catch (const std::exception& e) {
        sample.error = e.what();
      }
      sample.received = steady_seconds();
      const bool failed = !sample.error.empty();
      {
        std::lock_guard lock(mu_);
        samples_.push_back(std::move(sample));
      }
      if (failed) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
}

void ProbeClient::stop() {
  running_ = false;
  if (thread_.joinable()) thread_.join();
}

std::vector<ProbeSample> ProbeClient::samples() const {
  std::lock_guard lock(mu_);
  return samples_;
}

double ProbeClient::wait_for_version(uint32_t version, double timeout_s, int count) const {
  const double deadline = steady_seconds() + timeout_s;
  while (steady_seconds() < deadline) {
    {
      std::lock_guard lock(mu_);
      int seen = 0;
      for (const auto& s : samples_) {
        if (s.error.empty() && s.version == version && ++seen == count) return s.received;
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return -1;
}

double ProbeClient::wait_for_sent_after(double after, int count, double idle_timeout_s) const {
  double last_arrival = steady_seconds();
  size_t scanned = 0;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      // Only an answer moves the deadline: a slow engine that still answers is waited for, one that only fails (the
      // probe retries every few ms) is not. New samples are looked at before the deadline, so a waiter starved for a
      // while still finds the answers that arrived meanwhile.
      for (; scanned < samples_.size(); ++scanned) {
        if (samples_[scanned].error.empty()) last_arrival = steady_seconds();
      }
      int seen = 0;
      for (const auto& s : samples_) {
        if (s.error.empty() && s.sent > after && ++seen == count) return s.received;
      }
    }
    if (steady_seconds() >= last_arrival + idle_timeout_s) return -1;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

double max_step_gap(const std::vector<ProbeSample>& samples) {
  std::vector<double> times;
  for (const auto& s : samples) times.insert(times.end(), s.step_times.begin(), s.step_times.end());
  std::sort(times.begin(), times.end());
  double gap = 0;
  for (size_t i = 1; i < times.size(); ++i) gap = std::max(gap, times[i] - times[i - 1]);
  return gap;
}

}  // namespace wsb
