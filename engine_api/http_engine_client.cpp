#include "engine_api/http_engine_client.hpp"

#include <fmt/format.h>

#include <algorithm>

#include <chrono>
#include <thread>

#include "core/errors.hpp"
#include "core/phase_log.hpp"
#include "engine_api/wsbench_extras.hpp"
#include "modes/disk/disk_mode.hpp"
#include "publication/store.hpp"

namespace wsb {
namespace {

using json = nlohmann::json;

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
}

PauseMode pause_of(const Protocol& protocol, const std::optional<PauseMode>& asked) {
  return asked.value_or(protocol.default_pause_mode());
}

}  // namespace

std::vector<std::string> default_serve_command(const EngineLaunch& launch) {
  std::vector<std::string> argv{"{self}",     "--profiles", "{profiles}",  "serve",           "--protocol",
                                "{protocol}", "--model",    "{model}",     "--mode",          "{mode}",
                                "--tp",       "{tp}",       "--store",     "{store}",         "--checkpoint",
                                "{checkpoint}", "--version", "{version}",  "--workdir",       "{workdir}",
                                "--host",     "{host}",     "--port",      "{port}",          "--prepare-threads",
                                "{prepare_threads}"};
  // Upstream SGLang and vLLM boot as "default" unless told otherwise: the harness meets that case as users do.
  if (launch.protocol != "sglang" && launch.protocol != "vllm") {
    argv.insert(argv.end(), {"--weight-version", "{version}"});
  }
  if (launch.layers) argv.insert(argv.end(), {"--layers", "{layers}"});
  if (launch.experts) argv.insert(argv.end(), {"--experts", "{experts}"});
  if (launch.options.backend != "cpu") argv.insert(argv.end(), {"--backend", launch.options.backend});
  // The sync options beyond the mode, as serve's flags: the server runs what the cell's label says.
  const SyncOptions& sync = launch.options.sync;
  if (sync.mode == SyncModeKind::Cpu && sync.cpu.commit_strategy != CommitStrategy::Full) {
    argv.insert(argv.end(), {"--commit-strategy", "{commit_strategy}"});
    if (sync.cpu.delta_staging_bytes != 0) {
      argv.insert(argv.end(), {"--delta-staging-bytes", std::to_string(sync.cpu.delta_staging_bytes)});
    }
  }
  return argv;
}

std::vector<std::string> server_command(const EngineLaunch& launch, const std::filesystem::path& checkpoint_dir,
                                        uint32_t version, int port) {
  const auto& spec = launch.server;
  // A server whose protocol does not prepare (its commit reloads what the harness materialized) runs no sync mode
  // of its own: wsbench serve gets disk mode, whose state the reload never touches.
  const SyncModeKind served_mode = make_protocol(launch.protocol)->server_prepares(launch.options.sync.mode)
                                       ? launch.options.sync.mode
                                       : SyncModeKind::Disk;
  const std::vector<std::pair<std::string, std::string>> values{
      {"{self}", spec.self.string()},
      {"{profiles}", std::filesystem::absolute(spec.profiles_dir).string()},
      {"{model}", std::string(base_profile_id(launch.options.profile.id))},  // the scale travels as {layers}, {experts}
      {"{mode}", name_of(served_mode)},
      {"{commit_strategy}", name_of(launch.options.sync.cpu.commit_strategy)},
      {"{protocol}", launch.protocol},
      {"{tp}", std::to_string(launch.options.tp)},
      {"{store}", std::filesystem::absolute(launch.options.store).string()},
      {"{checkpoint}", std::filesystem::absolute(checkpoint_dir).string()},
      {"{version}", std::to_string(version)},
      {"{workdir}", std::filesystem::absolute(launch.options.workdir).string()},
      {"{host}", "127.0.0.1"},
      {"{port}", std::to_string(port)},
      {"{prepare_threads}", std::to_string(launch.options.prepare_threads)},
      {"{layers}", launch.layers ? std::to_string(*launch.layers) : ""},
      {"{experts}", launch.experts ? std::to_string(*launch.experts) : ""}};
  std::vector<std::string> argv = spec.command.empty() ? default_serve_command(launch) : spec.command;
  for (auto& element : argv) {
    for (const auto& [key, value] : values) replace_all(element, key, value);
  }
  return expand_launcher(spec.launcher, argv, std::filesystem::absolute(launch.options.workdir).string(),
                         spec.self.string());
}

HttpEngineClient::HttpEngineClient(std::string host, int port, HttpClientSpec spec)
    : host_(std::move(host)), port_(port), spec_(std::move(spec)), protocol_(make_protocol(spec_.protocol)) {
  pause_ = pause_of(*protocol_, spec_.pause_mode);
  if (const std::string why = protocol_support(*protocol_, spec_.options.sync.mode, pause_); !why.empty()) {
    throw Error(ErrorKind::Format, why);
  }
  served_ = spec_.boot_version;
}

HttpEngineClient::HttpEngineClient(const EngineLaunch& launch, const std::filesystem::path& checkpoint_dir,
                                   uint32_t version)
    : HttpEngineClient("127.0.0.1", pick_free_port(),
                       HttpClientSpec{launch.protocol, launch.pause_mode, launch.options, version, checkpoint_dir,
                                      HttpTimeouts{2, launch.server.request_timeout_s}}) {
  stop_timeout_s_ = launch.server.stop_timeout_s;
  std::filesystem::create_directories(launch.options.workdir);
  process_ = std::make_unique<ServerProcess>(server_command(launch, checkpoint_dir, version, port_),
                                             launch.options.workdir / "server.log");
  try {
    wait_healthy(launch.server.ready_timeout_s);
  } catch (...) {
    process_->stop(stop_timeout_s_);
    throw;
  }
}

HttpEngineClient::~HttpEngineClient() {
  if (process_) process_->stop(stop_timeout_s_);
}

std::string HttpEngineClient::process_note() {
  if (!process_) return "";
  const std::string ended = process_->exit_description();
  if (ended.empty()) return "";
  return fmt::format("; the server process {}; log tail: {}", ended, body_excerpt(process_->log_tail(400)));
}

void HttpEngineClient::wait_healthy(double timeout_s) {
  const HttpRequest health = protocol_->health();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::string last = "no answer";
  bool answered = false;
  for (;;) {
    if (const std::string ended = process_->exit_description(); !ended.empty()) {
      throw Error(ErrorKind::Io, fmt::format("{}: the server process {} before it became healthy; log tail: {}",
                                             health.endpoint(), ended, body_excerpt(process_->log_tail(400))));
    }
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    std::string why;
    HttpRequest probe = health;
    probe.timeout_s = left;
    if (auto reply = send_http(host_, port_, probe, HttpTimeouts{std::min(left, spec_.timeouts.connect_s), left}, &why)) {
      if (reply->status == 200) return;
      last = fmt::format("HTTP {}: {}", reply->status, body_excerpt(reply->body));
      answered = true;
    } else if (!answered) {
      // Once the server has answered, a later silence is usually the deadline cutting the last poll short: the
      // answer it gave says more about why it is not healthy.
      last = fmt::format("no answer ({})", why);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw Error(ErrorKind::Io, fmt::format("{}: the server did not become healthy within {} s (last: {})",
                                         health.endpoint(), timeout_s, last));
}

std::optional<HttpReply> HttpEngineClient::exchange(const HttpRequest& request, bool optional) {
  {
    std::lock_guard lock(mu_);
    if (stopped_) {
      throw Error(ErrorKind::State, fmt::format("{}: the server was stopped ({})", request.endpoint(), *stopped_));
    }
  }
  std::string why;
  auto reply = send_http(host_, port_, request, spec_.timeouts, &why);
  if (!reply) {
    // Give a dying process a moment to be reaped, so the reason says how it ended.
    for (int i = 0; i < 20 && process_ && process_->exit_description().empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    throw Error(ErrorKind::Io, fmt::format("{}: no answer from {}:{} ({}){}", request.endpoint(), host_, port_, why,
                                           process_note()));
  }
  if (optional && reply->status == 404) return std::nullopt;
  if (reply->status < 200 || reply->status >= 300) {
    throw_reply_error(reply->status >= 500 ? ErrorKind::Fatal : ErrorKind::State, request, *reply,
                      "the server refused");
  }
  return reply;
}

std::optional<json> HttpEngineClient::exchange_json(const HttpRequest& request, bool optional) {
  auto reply = exchange(request, optional);
  if (!reply) return std::nullopt;
  if (protocol_->plain_text(request)) return json(reply->body);
  try {
    return json::parse(reply->body);
  } catch (const json::exception&) {
    throw_reply_error(ErrorKind::Format, request, *reply,
                      fmt::format("the answer is not JSON (Content-Type '{}')", reply->content_type));
  }
}

void HttpEngineClient::check_forward(const std::string& endpoint, uint32_t version) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = highest_.try_emplace(endpoint, version);
  if (!inserted && version < it->second) {
    throw Error(ErrorKind::Format, fmt::format("{}: weight_version went backwards: {} after {}", endpoint,
                                               version_string(version), version_string(it->second)));
  }
  it->second = std::max(it->second, version);
}

uint32_t HttpEngineClient::version_number(const WeightVersion& version, const std::string& endpoint) {
  if (version.value) return *version.value;
  if (version.is_default()) {
    std::lock_guard lock(mu_);
    const std::string warning = fmt::format(
        "{} reports weight_version \"default\" (a server started without --weight-version): taken as the boot "
        "version {}",
        endpoint, version_string(spec_.boot_version));
    if (std::find(warnings_.begin(), warnings_.end(), warning) == warnings_.end()) warnings_.push_back(warning);
    return spec_.boot_version;
  }
  throw Error(ErrorKind::Format,
              fmt::format("{}: weight_version {} is neither a number nor \"default\": wsbench cannot tell which "
                          "publication it is",
                          endpoint, describe(version)));
}

GenerateResponse HttpEngineClient::generate(const GenerateRequest& request) {
  HttpRequest http = protocol_->generate(request);
  http.extras = true;
  const json reply = *exchange_json(http);
  GenerateResult result = protocol_->parse_generate(reply);
  if (result.version.text.empty()) {
    // The server reports no version per response (vLLM's completions): the one it reports right after the answer
    // stands for it. A commit's pause, reload and version update take longer than this one request, so only an
    // answer received in the instant before the version moves could be misattributed (its fingerprint then fails).
    const HttpRequest info = protocol_->weight_version();
    result.version = protocol_->parse_weight_version(*exchange_json(info));
    std::lock_guard lock(mu_);
    const std::string warning = fmt::format(
        "{} reports no weight version per response: each response is attributed the version {} reports right after "
        "it",
        http.endpoint(), info.endpoint());
    if (std::find(warnings_.begin(), warnings_.end(), warning) == warnings_.end()) warnings_.push_back(warning);
  }
  GenerateResponse response = std::move(result.response);
  response.weight_version = version_number(result.version, http.endpoint());
  response.step_versions.clear();
  for (const auto& v : result.step_versions) response.step_versions.push_back(version_number(v, http.endpoint()));
  // A server that reports no step times: the response's arrival stands for its last decode step.
  if (response.step_times.empty()) response.step_times.push_back(steady_seconds());
  check_forward(http.endpoint(), response.weight_version);
  return response;
}

UpdateSpec HttpEngineClient::update_spec(uint32_t target) const {
  UpdateSpec spec;
  {
    std::lock_guard lock(mu_);
    spec.served = served_;
  }
  spec.target = target;
  spec.store = std::filesystem::absolute(spec_.options.store);
  spec.mode = spec_.options.sync.mode;
  spec.pause = pause_;
  spec.tp = spec_.options.tp;
  spec.bucket_bytes = spec_.options.sync.refit.bucket_bytes;
  spec.base_checkpoint_dir = spec_.boot_checkpoint.empty() ? std::filesystem::path{}
                                                            : std::filesystem::absolute(spec_.boot_checkpoint);
  spec.local_checkpoint_dir = std::filesystem::absolute(spec_.options.workdir) / "engine-checkpoint";
  if (harness_prepare_) spec.checkpoint_dir = static_cast<const DiskMode&>(*harness_prepare_).checkpoint_dir();
  return spec;
}

PrepareReport HttpEngineClient::prepare(uint32_t target) {
  PrepareReport report;
  report.target = target;
  const double t0 = steady_seconds();
  if (protocol_->server_prepares(spec_.options.sync.mode)) {
    const HttpRequest request = *protocol_->prepare(update_spec(target));
    protocol_->check_update_reply(request, *exchange_json(request));
    HttpRequest last{"GET", "/wsbench/last_update", {}, std::nullopt};
    if (auto extra = exchange_json(last, true)) report.phases = wire_phases(*extra, "prepare", last.endpoint());
  } else {
    // The protocol reloads a checkpoint directory: the harness materializes it here, as disk mode's prepare does
    // on the engine's host (same machine), and the commit names it.
    if (!harness_prepare_) {
      SyncContext context{spec_.options.profile, build_rank_layouts(spec_.options.profile, spec_.options.tp),
                          spec_.options.store, std::filesystem::absolute(spec_.options.workdir) / "harness-prepare",
                          spec_.options.prepare_threads};
      context.sync = spec_.options.sync;
      context.sync.mode = SyncModeKind::Disk;
      harness_prepare_ = std::make_unique<DiskMode>(std::move(context));
    }
    PhaseLog log;
    uint32_t served;
    {
      std::lock_guard lock(mu_);
      served = served_;
    }
    harness_prepare_->prepare(served, target, log);
    for (PhaseRecord record : log.records()) {
      record.name = "harness." + record.name;
      report.phases.push_back(std::move(record));
    }
  }
  report.seconds = steady_seconds() - t0;
  return report;
}

CommitReport HttpEngineClient::commit(uint32_t target) {
  if (harness_prepare_) harness_prepare_->preflight(target);  // refuses a target the harness did not prepare
  const UpdateSpec spec = update_spec(target);
  const std::vector<CommitCall> calls = protocol_->commit(spec);
  CommitReport report;
  report.target = target;
  const double t0 = steady_seconds();
  run_commit_calls(calls, [&](const HttpRequest& request) {
    protocol_->check_update_reply(request, *exchange_json(request));
  });
  report.seconds = steady_seconds() - t0;  // pause call to continue call: the pause's upper bound
  {
    std::lock_guard lock(mu_);
    served_ = target;
  }
  HttpRequest last{"GET", "/wsbench/last_update", {}, std::nullopt};
  if (auto extra = exchange_json(last, true)) {
    report.phases = wire_phases(*extra, "commit", last.endpoint());
    report.pause_seconds = wire_pause_seconds(*extra, last.endpoint());
  }
  return report;
}

std::vector<std::map<std::string, std::string>> HttpEngineClient::storage_checksums() {
  const auto request = protocol_->checksums();
  if (!request) return {};
  return protocol_->parse_checksums(*exchange_json(*request)).ranks;
}

bool HttpEngineClient::reports_checksums() const { return protocol_->checksums().has_value(); }

std::string HttpEngineClient::checksum_basis() const {
  const auto request = protocol_->checksums();
  if (!request) return fmt::format("none: protocol '{}' has no checksum endpoint", protocol_->name());
  return fmt::format("{} ({})", request->endpoint(), protocol_->name());
}

std::vector<std::vector<StoragePointer>> HttpEngineClient::storage_pointers() {
  HttpRequest request{"GET", "/wsbench/storage_pointers", {}, std::nullopt};
  auto j = exchange_json(request, true);
  return j ? wire_pointers(*j, request.endpoint()) : std::vector<std::vector<StoragePointer>>{};
}

uint32_t HttpEngineClient::weight_version() {
  const HttpRequest request = protocol_->weight_version();
  const uint32_t version = version_number(protocol_->parse_weight_version(*exchange_json(request)), request.endpoint());
  check_forward(request.endpoint(), version);
  return version;
}

bool HttpEngineClient::healthy() {
  HttpRequest request = protocol_->health();
  auto reply = send_http(host_, port_, request, HttpTimeouts{spec_.timeouts.connect_s, spec_.timeouts.connect_s});
  return reply && reply->status == 200;
}

std::optional<ModeMemory> HttpEngineClient::mode_memory() {
  HttpRequest request{"GET", "/wsbench/mode_memory", {}, std::nullopt};
  auto j = exchange_json(request, true);
  if (!j) return std::nullopt;
  return wire_mode_memory(*j, request.endpoint());
}

std::vector<PhaseRecord> HttpEngineClient::boot_phases() {
  HttpRequest request{"GET", "/wsbench/boot_phases", {}, std::nullopt};
  auto j = exchange_json(request, true);
  if (!j) return {};
  return wire_phases(*j, "boot", request.endpoint());
}

std::vector<std::string> HttpEngineClient::warnings() const {
  std::lock_guard lock(mu_);
  return warnings_;
}

nlohmann::json HttpEngineClient::shutdown() {
  json out{{"host", host_}, {"port", port_}, {"protocol", protocol_->name()}, {"pause_mode", name_of(pause_)}};
  if (process_) {
    out.update(process_->stop(stop_timeout_s_));
    out["command"] = process_->argv();
    out["log"] = process_->log().string();
    out["log_tail"] = process_->log_tail(2000);
  }
  std::lock_guard lock(mu_);
  stopped_ = out.value("stop", std::string("disconnected"));
  return out;
}

}  // namespace wsb
