#include "engine_api/http_engine_client.hpp"

#include <httplib.h>

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "engine_api/http_api.hpp"
#include "core/errors.hpp"
#include "core/phase_log.hpp"
#include "publication/store.hpp"

namespace wsb {
namespace {

using json = nlohmann::json;

void set_timeout(httplib::Client& cli, double seconds, bool connect) {
  const auto whole = static_cast<time_t>(seconds);
  const auto usec = static_cast<time_t>(std::llround((seconds - static_cast<double>(whole)) * 1e6));
  if (connect) {
    cli.set_connection_timeout(whole, usec);
  } else {
    cli.set_read_timeout(whole, usec);
    cli.set_write_timeout(whole, usec);
  }
}

std::string excerpt(const std::string& body) {
  std::string s = body.substr(0, 120);
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return body.size() > 120 ? s + "..." : s;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
}

}  // namespace

std::vector<std::string> default_serve_command(const EngineLaunch& launch) {
  std::vector<std::string> argv{"{self}",     "--profiles", "{profiles}",  "serve",           "--model",
                                "{model}",    "--mode",     "{mode}",      "--tp",            "{tp}",
                                "--store",    "{store}",    "--checkpoint", "{checkpoint}",   "--version",
                                "{version}",  "--workdir",  "{workdir}",   "--host",          "{host}",
                                "--port",     "{port}",     "--prepare-threads", "{prepare_threads}"};
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
  const std::vector<std::pair<std::string, std::string>> values{
      {"{self}", spec.self.string()},
      {"{profiles}", std::filesystem::absolute(spec.profiles_dir).string()},
      {"{model}", std::string(base_profile_id(launch.options.profile.id))},  // the scale travels as {layers}, {experts}
      {"{mode}", name_of(launch.options.sync.mode)},
      {"{commit_strategy}", name_of(launch.options.sync.cpu.commit_strategy)},
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

HttpEngineClient::HttpEngineClient(std::string host, int port, std::filesystem::path store, HttpTimeouts timeouts)
    : host_(std::move(host)), port_(port), timeouts_(timeouts), store_(std::move(store)) {}

HttpEngineClient::HttpEngineClient(const EngineLaunch& launch, const std::filesystem::path& checkpoint_dir,
                                   uint32_t version)
    : host_("127.0.0.1"), port_(pick_free_port()), store_(launch.options.store), stop_timeout_s_(launch.server.stop_timeout_s) {
  timeouts_.request_s = launch.server.request_timeout_s;
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
  return fmt::format("; the server process {}; log tail: {}", ended, excerpt(process_->log_tail(400)));
}

void HttpEngineClient::wait_healthy(double timeout_s) {
  const std::string endpoint = "GET /health";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::string last = "no answer";
  bool answered = false;
  for (;;) {
    if (const std::string ended = process_->exit_description(); !ended.empty()) {
      throw Error(ErrorKind::Io, fmt::format("{}: the server process {} before it became healthy; log tail: {}",
                                             endpoint, ended, excerpt(process_->log_tail(400))));
    }
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    httplib::Client cli(host_, port_);
    set_timeout(cli, std::min(left, timeouts_.connect_s), true);
    set_timeout(cli, left, false);
    if (auto res = cli.Get("/health")) {
      if (res->status == 200) return;
      last = fmt::format("HTTP {}: {}", res->status, excerpt(res->body));
      answered = true;
    } else if (!answered) {
      // Once the server has answered, a later silence is usually the deadline cutting the last poll short: the
      // answer it gave says more about why it is not healthy.
      last = fmt::format("no answer ({})", httplib::to_string(res.error()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw Error(ErrorKind::Io, fmt::format("{}: the server did not become healthy within {} s (last: {})", endpoint,
                                         timeout_s, last));
}

std::optional<json> HttpEngineClient::call(const std::string& method, const std::string& path, const json* body,
                                           bool optional, double timeout_s) {
  const std::string endpoint = fmt::format("{} {}", method, path);
  {
    std::lock_guard lock(mu_);
    if (stopped_) throw Error(ErrorKind::State, fmt::format("{}: the server was stopped ({})", endpoint, *stopped_));
  }
  httplib::Client cli(host_, port_);
  set_timeout(cli, timeouts_.connect_s, true);
  set_timeout(cli, timeout_s > 0 ? timeout_s : timeouts_.request_s, false);
  httplib::Result res = method == "GET" ? cli.Get(path.c_str())
                                        : cli.Post(path.c_str(), body != nullptr ? body->dump() : "{}", "application/json");
  if (!res) {
    // Give a dying process a moment to be reaped, so the reason says how it ended.
    for (int i = 0; i < 20 && process_ && process_->exit_description().empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    throw Error(ErrorKind::Io, fmt::format("{}: no answer from {}:{} ({}){}", endpoint, host_, port_,
                                           httplib::to_string(res.error()), process_note()));
  }
  if (optional && res->status == 404) return std::nullopt;
  json parsed;
  try {
    parsed = json::parse(res->body);
  } catch (const json::parse_error&) {
    throw Error(ErrorKind::Format, fmt::format("{}: HTTP {} response is not JSON ({}): '{}'", endpoint, res->status,
                                               res->get_header_value("Content-Type"), excerpt(res->body)));
  }
  if (res->status < 200 || res->status >= 300) {
    std::string message = parsed.is_object() && parsed.contains("message") && parsed["message"].is_string()
                              ? parsed["message"].get<std::string>()
                              : excerpt(res->body);
    std::optional<ErrorKind> kind;
    if (parsed.is_object() && parsed.contains("error_kind") && parsed["error_kind"].is_string()) {
      kind = api::parse_error_kind(parsed["error_kind"].get<std::string>());
    }
    {
      std::lock_guard lock(mu_);
      kinds_seen_ = kind.has_value();
    }
    const ErrorKind fallback = res->status >= 500 ? ErrorKind::Fatal : ErrorKind::State;
    throw Error(kind.value_or(fallback), fmt::format("{}: HTTP {}: {}", endpoint, res->status, message));
  }
  return parsed;
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

GenerateResponse HttpEngineClient::generate(const GenerateRequest& request) {
  const std::string endpoint = "POST /generate";
  const json body = api::generate_request_json(request);
  GenerateResponse response = api::parse_generate_response(*call("POST", "/generate", &body), endpoint);
  // A server that reports no step times: the response's arrival stands for its last decode step.
  if (response.step_times.empty()) response.step_times.push_back(steady_seconds());
  check_forward(endpoint, response.weight_version);
  return response;
}

PrepareReport HttpEngineClient::prepare(uint32_t target) {
  json body{{"target_version", api::version_json(target)}};
  if (!store_.empty()) body["checkpoint_source_dir"] = std::filesystem::absolute(store_).string();
  const double t0 = steady_seconds();
  PrepareReport report =
      api::parse_prepare_response(*call("POST", "/prepare_weight_update", &body), target, "POST /prepare_weight_update");
  if (report.seconds == 0) report.seconds = steady_seconds() - t0;  // a server without wsbench_seconds
  return report;
}

CommitReport HttpEngineClient::commit(uint32_t target) {
  const json body{{"target_version", api::version_json(target)}, {"abort_all_requests", false}, {"flush_cache", true}};
  const double t0 = steady_seconds();
  CommitReport report =
      api::parse_commit_response(*call("POST", "/commit_weight_update", &body), target, "POST /commit_weight_update");
  if (report.seconds == 0) report.seconds = steady_seconds() - t0;
  return report;
}

std::vector<std::map<std::string, std::string>> HttpEngineClient::storage_checksums() {
  const json body{{"action", "checksum"}};
  return api::parse_checksums(*call("POST", "/weights_checker", &body), "POST /weights_checker");
}

std::vector<std::vector<StoragePointer>> HttpEngineClient::storage_pointers() {
  auto j = call("GET", "/wsbench/storage_pointers", nullptr, true);
  return j ? api::parse_pointers(*j, "GET /wsbench/storage_pointers") : std::vector<std::vector<StoragePointer>>{};
}

uint32_t HttpEngineClient::weight_version() {
  const std::string endpoint = "GET /model_info";
  const json j = *call("GET", "/model_info", nullptr);
  if (!j.is_object() || !j.contains("weight_version")) {
    throw Error(ErrorKind::Format, fmt::format("{}: field 'weight_version' is missing", endpoint));
  }
  const uint32_t version = api::parse_version(j["weight_version"], endpoint + ": field 'weight_version'");
  check_forward(endpoint, version);
  return version;
}

bool HttpEngineClient::healthy() {
  httplib::Client cli(host_, port_);
  set_timeout(cli, timeouts_.connect_s, true);
  set_timeout(cli, timeouts_.connect_s, false);
  auto res = cli.Get("/health");
  return res && res->status == 200;
}

std::optional<ModeMemory> HttpEngineClient::mode_memory() {
  auto j = call("GET", "/wsbench/mode_memory", nullptr, true);
  if (!j) return std::nullopt;
  return api::parse_mode_memory(*j, "GET /wsbench/mode_memory");
}

std::vector<PhaseRecord> HttpEngineClient::boot_phases() {
  const std::string endpoint = "GET /wsbench/boot_phases";
  auto j = call("GET", "/wsbench/boot_phases", nullptr, true);
  if (!j) return {};
  if (!j->is_object() || !j->contains("phases")) {
    throw Error(ErrorKind::Format, endpoint + ": field 'phases' is missing");
  }
  return api::parse_phases((*j)["phases"], endpoint);
}

bool HttpEngineClient::reports_error_kinds() const {
  std::lock_guard lock(mu_);
  return kinds_seen_;
}

nlohmann::json HttpEngineClient::shutdown() {
  json out{{"host", host_}, {"port", port_}};
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
