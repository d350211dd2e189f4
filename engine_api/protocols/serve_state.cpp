#include "engine_api/protocols/serve_routes.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/errors.hpp"
#include "engine_api/protocols/factories.hpp"

namespace wsb {

ServeState::ServeState(Engine& engine, WeightVersion boot_version, std::filesystem::path boot_checkpoint,
                       std::filesystem::path workdir)
    : engine_(engine), boot_checkpoint_(std::move(boot_checkpoint)), workdir_(std::move(workdir)) {
  served_engine_version_ = highest_engine_version_ = engine.weight_version();
  texts_[served_engine_version_] = std::move(boot_version);
}

WeightVersion ServeState::served_version() const {
  std::lock_guard lock(mu_);
  return texts_.at(served_engine_version_);
}

WeightVersion ServeState::version_text(uint32_t engine_version) const {
  std::lock_guard lock(mu_);
  auto it = texts_.find(engine_version);
  return it != texts_.end() ? it->second : WeightVersion::parse(std::to_string(engine_version));
}

uint32_t ServeState::engine_version_for(const std::optional<std::string>& text) {
  std::lock_guard lock(mu_);
  if (text) {
    const WeightVersion v = WeightVersion::parse(*text);
    if (v.value && *v.value != served_engine_version_) return *v.value;
  }
  return highest_engine_version_ + 1;
}

void ServeState::set_served(uint32_t engine_version, const WeightVersion& text) {
  std::lock_guard lock(mu_);
  texts_[engine_version] = text;
  previous_served_ = served_engine_version_;
  served_engine_version_ = engine_version;
  highest_engine_version_ = std::max(highest_engine_version_, engine_version);
}

std::optional<uint32_t> ServeState::previous_served() const {
  std::lock_guard lock(mu_);
  return previous_served_;
}

std::optional<PauseMode> ServeState::pause_mode() const {
  std::lock_guard lock(mu_);
  return pause_mode_;
}

void ServeState::set_pause_mode(std::optional<PauseMode> mode) {
  std::lock_guard lock(mu_);
  pause_mode_ = mode;
}

void ServeState::record_prepare(const PrepareReport& report) {
  std::lock_guard lock(mu_);
  last_.prepare = report;
}

void ServeState::record_commit(const CommitReport& report) {
  std::lock_guard lock(mu_);
  last_.commit = report;
}

LastUpdate ServeState::last_update() const {
  std::lock_guard lock(mu_);
  return last_;
}

std::vector<Route> protocol_routes(std::string_view name, ServeState& state) {
  if (name == "sglang") return sglang_routes(state);
  if (name == "stitch-v0.5.15") return stitch_v0515_routes(state, false);
  if (name == "stitch-v0.5.15-host-runtime") return stitch_v0515_routes(state, true);
  if (name == "stitch-v0.5.16") return stitch_v0516_routes(state);
  if (name == "stitch-staging") return stitch_staging_routes(state);
  if (name == "vllm") return vllm_routes(state);
  make_protocol(name);  // throws naming the known protocols
  return {};
}

HttpReply json_reply(int status, const nlohmann::json& body) {
  // Bytes that are not UTF-8 (the byte-level vocabulary detokenizes to any bytes) go out as U+FFFD, as a real
  // server's detokenizer sends them: both sides of every fingerprint comparison see the same text.
  return HttpReply{status, "application/json", body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
}

HttpReply text_reply(int status, std::string text) { return HttpReply{status, "text/plain", std::move(text)}; }

GenerateResult serve_generate(ServeState& state, const GenerateRequest& request) {
  GenerateResult result;
  result.response = state.engine().generate(request);
  result.version = state.version_text(result.response.weight_version);
  for (uint32_t v : result.response.step_versions) result.step_versions.push_back(state.version_text(v));
  if (state.on_generate) state.on_generate(result);
  return result;
}

}  // namespace wsb
