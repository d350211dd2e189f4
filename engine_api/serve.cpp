#include "engine_api/serve.hpp"

#include <httplib.h>
#include <signal.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <atomic>
#include <optional>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <mutex>
#include <thread>

#include "engine_api/http_api.hpp"
#include "core/errors.hpp"
#include "publication/store.hpp"

namespace wsb {
namespace {

using json = nlohmann::json;

/// The status of an error: state-machine and input errors are the client's (400); an engine that stopped serving
/// or a machine failure is the server's (500).
int http_status(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Fatal:
    case ErrorKind::Io:
    case ErrorKind::Resource: return 500;
    default: return 400;
  }
}

/// Bytes that are not UTF-8 (the byte-level vocabulary detokenizes to any bytes) go out as U+FFFD, as a real
/// server's detokenizer sends them: both sides of every fingerprint comparison see the same text.
void reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

bool same_path(const std::filesystem::path& a, const std::filesystem::path& b) {
  std::error_code ec1, ec2;
  const auto ca = std::filesystem::weakly_canonical(a, ec1);
  const auto cb = std::filesystem::weakly_canonical(b, ec2);
  return !ec1 && !ec2 ? ca == cb : a == b;
}

/// The hook of --fault fail-in-commit: `rank` fails once its first storage is written, every later commit too.
FaultHook fail_in_commit_hook(int rank) {
  return [rank](const FaultSite& site) {
    if (site.point != FaultPoint::CommitStorageWritten || site.rank != rank || site.index != 0) return;
    throw Error(ErrorKind::Io, fmt::format("fault fail-in-commit: rank {} failed after writing storage '{}'", site.rank,
                                           site.name));
  };
}

class Server {
 public:
  Server(const ServeOptions& options, Engine& engine) : options_(options), engine_(engine) {
    if (options.version != 0) options_.faults = ServeFaults{};  // faults are for trial servers (booted at v0)
    if (options_.faults.die_in_commit) {
      engine_.debug_set_inside_pause([] {
        std::cerr << "wsbench serve: fault die-in-commit: exiting inside the commit pause\n";
        std::_Exit(17);
      });
    }
    route("POST", "/generate", [this](const json& body) { return generate(body); });
    route("POST", "/prepare_weight_update", [this](const json& body) { return prepare(body); });
    route("POST", "/commit_weight_update", [this](const json& body) { return commit(body); });
    route("POST", "/weights_checker", [this](const json& body) { return weights_checker(body); });
    route("GET", "/model_info", [this](const json&) { return model_info(); });
    route("POST", "/flush_cache", [](const json&) { return json{{"success", true}, {"message", "no cache to flush"}}; });
    route("GET", "/wsbench/storage_pointers", [this](const json&) { return api::pointers_json(engine_.storage_pointers()); });
    route("GET", "/wsbench/mode_memory", [this](const json&) { return api::mode_memory_json(engine_.mode().memory()); });
    route("GET", "/wsbench/boot_phases", [this](const json&) { return json{{"phases", api::phases_json(boot_phases_)}}; });
    http_.Get("/health", [this](const httplib::Request&, httplib::Response& res) { health(res); });
    // cpp-httplib answers some requests itself (an unknown path: 404; a POST it cannot read a body from: 400) with
    // an empty body: give those the same JSON error shape as every other answer, naming the request.
    http_.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      const std::string why = res.status == 404 ? "no such endpoint"
                              : req.method == "POST"
                                  ? "refused before it reached the endpoint (a POST needs a Content-Length header "
                                    "and a JSON body)"
                                  : "refused before it reached the endpoint";
      reply(res, res.status, api::error_json(fmt::format("{} {}: HTTP {}: {}", req.method, req.path, res.status, why),
                                             ErrorKind::Format));
    });
  }

  void set_boot_phases(std::vector<PhaseRecord> phases) { boot_phases_ = std::move(phases); }
  httplib::Server& http() { return http_; }

 private:
  using Handler = std::function<json(const json&)>;

  void route(const std::string& method, const std::string& path, Handler handler) {
    auto wrapped = [this, path, handler](const httplib::Request& req, httplib::Response& res) {
      const std::string endpoint = fmt::format("{} {}", req.method, path);
      if (auto it = options_.faults.endpoint.find(path); it != options_.faults.endpoint.end()) {
        if (it->second == "non-json") {
          res.status = 200;
          res.set_content("<html>fault non-json</html>", "text/html");
        } else if (it->second == "wrong-shape") {
          reply(res, 200, json{{"unexpected", true}});
        } else {
          reply(res, 500, api::error_json(fmt::format("{}: fault http-500", endpoint), ErrorKind::Fatal));
        }
        return;
      }
      json body = json::object();
      if (!req.body.empty()) {
        try {
          body = json::parse(req.body);
        } catch (const json::exception& e) {  // parse_error, and out_of_range for a number beyond double (1e999)
          reply(res, 400, api::error_json(fmt::format("{}: request body is not JSON: {}", endpoint, e.what()),
                                          ErrorKind::Format));
          return;
        }
      }
      try {
        reply(res, 200, handler(body));
      } catch (const Error& e) {
        reply(res, http_status(e.kind()), api::error_json(e.what(), e.kind()));
      } catch (const std::exception& e) {
        reply(res, 500, api::error_json(fmt::format("{}: {}", endpoint, e.what()), std::nullopt));
      }
    };
    if (method == "GET") {
      http_.Get(path, wrapped);
    } else {
      http_.Post(path, wrapped);
    }
  }

  json generate(const json& body) {
    const GenerateRequest request = api::parse_generate_request(body, "POST /generate");
    GenerateResponse response = engine_.generate(request);
    const int64_t from = committed_from_.load();
    if (options_.faults.version_backwards && from >= 0 && backwards_counter_.fetch_add(1) % 2 == 1) {
      response.weight_version = static_cast<uint32_t>(from);
    }
    return api::generate_response_json(response);
  }

  uint32_t target_of(const json& body, const std::string& endpoint) {
    if (!body.is_object() || !body.contains("target_version")) {
      throw Error(ErrorKind::Format, fmt::format("{}: field 'target_version' is missing", endpoint));
    }
    return api::parse_version(body["target_version"], endpoint + ": field 'target_version'");
  }

  json prepare(const json& body) {
    const std::string endpoint = "POST /prepare_weight_update";
    const uint32_t target = target_of(body, endpoint);
    if (body.contains("checkpoint_source_dir")) {
      if (!body["checkpoint_source_dir"].is_string()) {
        throw Error(ErrorKind::Format, endpoint + ": field 'checkpoint_source_dir' must be a string");
      }
      const std::filesystem::path source = body["checkpoint_source_dir"].get<std::string>();
      if (!same_path(source, options_.engine.store)) {
        throw Error(ErrorKind::Format, fmt::format("{}: checkpoint_source_dir '{}' is not the store this server reads "
                                                   "('{}')", endpoint, source.string(), options_.engine.store.string()));
      }
    }
    return api::prepare_response_json(engine_.prepare(target));
  }

  json commit(const json& body) {
    const std::string endpoint = "POST /commit_weight_update";
    const uint32_t target = target_of(body, endpoint);
    for (const char* flag : {"abort_all_requests", "flush_cache"}) {
      if (body.contains(flag) && !body[flag].is_boolean()) {
        throw Error(ErrorKind::Format, fmt::format("{}: field '{}' must be true or false", endpoint, flag));
      }
    }
    const uint32_t from = engine_.weight_version();
    // In-flight requests restart at the new version inside the engine (which is also its cache flush), so
    // abort_all_requests and flush_cache need no action of their own.
    const CommitReport report = engine_.commit(target);
    committed_from_ = from;
    return api::commit_response_json(report);
  }

  json weights_checker(const json& body) {
    const std::string endpoint = "POST /weights_checker";
    if (!body.is_object() || !body.contains("action") || !body["action"].is_string()) {
      throw Error(ErrorKind::Format, endpoint + ": field 'action' (string) is missing");
    }
    const std::string action = body["action"].get<std::string>();
    if (action != "checksum") {
      throw Error(ErrorKind::Format, fmt::format("{}: action '{}' is unknown (checksum)", endpoint, action));
    }
    return api::checksums_json(engine_.storage_checksums());
  }

  json model_info() {
    return {{"model_path", options_.checkpoint.string()},
            {"weight_version", api::version_json(engine_.weight_version())},
            {"tp_size", options_.engine.tp},
            {"is_generation", true},
            {"wsbench", {{"profile", options_.engine.profile.id}, {"mode", options_.engine.sync.label()},
                         {"backend", options_.engine.backend}, {"healthy", engine_.healthy()}}}};
  }

  void health(httplib::Response& res) {
    if (options_.faults.slow_health_s) {
      std::this_thread::sleep_for(std::chrono::duration<double>(*options_.faults.slow_health_s));
    }
    if (options_.faults.never_healthy) {
      reply(res, 503, api::error_json("fault never-healthy", std::nullopt));
    } else if (!engine_.healthy()) {
      reply(res, 503, api::error_json("the engine stopped serving", ErrorKind::Fatal));
    } else {
      reply(res, 200, json{{"status", "ok"}});
    }
  }

  ServeOptions options_;
  Engine& engine_;
  httplib::Server http_;
  std::vector<PhaseRecord> boot_phases_;
  std::atomic<int64_t> committed_from_{-1};  ///< the version before the last commit; -1 before one
  std::atomic<uint64_t> backwards_counter_{0};
};

}  // namespace

void parse_serve_fault(const std::string& text, ServeFaults& faults) {
  const auto colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  if (text == "die-in-commit") {
    faults.die_in_commit = true;
  } else if (text == "fail-in-commit") {
    faults.fail_in_commit = true;
  } else if (text == "never-healthy") {
    faults.never_healthy = true;
  } else if (text == "version-backwards") {
    faults.version_backwards = true;
  } else if (text.starts_with("slow-health=")) {
    try {
      faults.slow_health_s = std::stod(text.substr(12));
    } catch (const std::exception&) {
      throw Error(ErrorKind::Format, fmt::format("--fault '{}': slow-health=SECONDS needs a number", text));
    }
  } else if (colon != std::string::npos && (kind == "non-json" || kind == "wrong-shape" || kind == "http-500") &&
             colon + 1 < text.size() && text[colon + 1] == '/') {
    faults.endpoint[text.substr(colon + 1)] = kind;
  } else {
    throw Error(ErrorKind::Format,
                fmt::format("--fault '{}' is unknown (die-in-commit, fail-in-commit, never-healthy, version-backwards, slow-health=S, "
                            "non-json:/path, wrong-shape:/path, http-500:/path)", text));
  }
}

int serve(const ServeOptions& options) {
  // SIGTERM/SIGINT are taken by one watcher thread; every other thread (engine, pool) inherits the blocked mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  EngineOptions engine_options = options.engine;
  if (options.faults.fail_in_commit && options.version == 0) {
    engine_options.fault_hook = fail_in_commit_hook(options.engine.tp - 1);
  }
  Engine engine(std::move(engine_options));
  const LoadReport load = engine.load_native(options.checkpoint, options.version);
  Server server(options, engine);
  server.set_boot_phases(load.phases);
  httplib::Server& http = server.http();
  // cpp-httplib's default options add SO_REUSEPORT, which lets a second server (a stale one, or a typo'd port)
  // share this port and silently take part of a run's requests: keep SO_REUSEADDR (fast restarts) only.
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void*>(&yes), sizeof yes);
  });
  int port = options.port;
  if (port == 0) {
    port = http.bind_to_any_port(options.host);
  } else if (!http.bind_to_port(options.host, port)) {
    port = -1;
  }
  if (port < 0) {
    throw Error(ErrorKind::Io, fmt::format("wsbench serve: cannot listen on {}:{}", options.host, options.port));
  }
  std::cout << fmt::format("wsbench serve: listening on {}:{} ({} {}, {})", options.host, port,
                           options.engine.profile.id, options.engine.sync.label(), version_string(options.version))
            << std::endl;
  std::atomic<bool> done{false};
  // The first signal closes the listener and lets running requests finish; a long generation must not keep the
  // process alive forever, so a second signal, or kStopGraceS after the first, ends it at once (exit 1).
  constexpr double kStopGraceS = 10.0;
  std::thread watcher([&] {
    const timespec tick{0, 100'000'000};
    std::optional<std::chrono::steady_clock::time_point> stopping;
    std::thread stopper;
    while (!done) {
      const bool signalled = sigtimedwait(&stop_signals, nullptr, &tick) > 0;
      if (signalled && !stopping) {
        stopping = std::chrono::steady_clock::now();
        stopper = std::thread([&http] { http.stop(); });  // waits for running handlers
      } else if (stopping && (signalled || std::chrono::steady_clock::now() - *stopping >
                                               std::chrono::duration<double>(kStopGraceS))) {
        std::cout << (signalled ? "wsbench serve: second stop signal with requests still running; exiting"
                                : "wsbench serve: requests still running 10 s after the stop signal; exiting")
                  << std::endl;
        std::_Exit(1);
      }
    }
    if (stopper.joinable()) stopper.join();
  });
  http.listen_after_bind();
  done = true;
  watcher.join();
  std::cout << "wsbench serve: stopped" << std::endl;
  return 0;
}

}  // namespace wsb
