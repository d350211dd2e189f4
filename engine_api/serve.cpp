#include "engine_api/serve.hpp"

#include <httplib.h>
#include <signal.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <optional>
#include <thread>

#include "core/errors.hpp"
#include "engine_api/protocols/serve_routes.hpp"
#include "engine_api/wsbench_extras.hpp"
#include "publication/store.hpp"

namespace wsb {
namespace {

using json = nlohmann::json;

/// The status of an error a route did not answer itself: input and state errors are the client's (400); an engine
/// that stopped serving or a machine failure is the server's (500).
int http_status(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Fatal:
    case ErrorKind::Io:
    case ErrorKind::Resource: return 500;
    default: return 400;
  }
}

void send(httplib::Response& res, const HttpReply& reply) {
  res.status = reply.status;
  res.set_content(reply.body, reply.content_type);
}

/// The hook of --fault fail-in-commit: `rank` fails once its first storage is written, every later commit too.
FaultHook fail_in_commit_hook(int rank) {
  return [rank](const FaultSite& site) {
    if (site.point != FaultPoint::CommitStorageWritten || site.rank != rank || site.index != 0) return;
    throw Error(ErrorKind::Io, fmt::format("fault fail-in-commit: rank {} failed after writing storage '{}'", site.rank,
                                           site.name));
  };
}

/// A JSON object without its first field (fault missing-field).
std::string without_first_field(const std::string& body) {
  try {
    json j = json::parse(body);
    if (j.is_object() && !j.empty()) j.erase(j.begin());
    return j.dump();
  } catch (const json::exception&) {
    return body;
  }
}

class Server {
 public:
  Server(const ServeOptions& options, Engine& engine, std::vector<PhaseRecord> boot_phases)
      : options_(options),
        engine_(engine),
        state_(engine, WeightVersion::parse(options.weight_version.value_or("default")), options.checkpoint,
               options.engine.workdir),
        boot_phases_(std::move(boot_phases)) {
    if (options.version != 0) options_.faults = ServeFaults{};  // faults are for trial servers (booted at v0)
    if (options_.faults.die_in_commit) {
      engine_.debug_set_inside_pause([] {
        std::cerr << "wsbench serve: fault die-in-commit: exiting inside the commit pause\n";
        std::_Exit(17);
      });
    }
    if (options_.faults.version_backwards) {
      // After a commit, every second answer reports the version served before it.
      state_.on_generate = [this](GenerateResult& result) {
        const auto previous = state_.previous_served();
        if (previous && backwards_counter_.fetch_add(1) % 2 == 1) result.version = state_.version_text(*previous);
      };
    }
    for (Route& route : protocol_routes(options_.protocol, state_)) add(std::move(route));
    add(Route{"GET", "/wsbench/storage_pointers",
              [this](const HttpRequest&) { return json_reply(200, pointers_json(engine_.storage_pointers())); }});
    add(Route{"GET", "/wsbench/mode_memory",
              [this](const HttpRequest&) { return json_reply(200, mode_memory_json(engine_.mode().memory())); }});
    add(Route{"GET", "/wsbench/boot_phases",
              [this](const HttpRequest&) { return json_reply(200, json{{"phases", phases_json(boot_phases_)}}); }});
    add(Route{"GET", "/wsbench/last_update",
              [this](const HttpRequest&) { return json_reply(200, last_update_json(state_.last_update())); }});
    if (!has_health_) {
      http_.Get("/health", [this](const httplib::Request&, httplib::Response& res) { health(res); });
    }
    // cpp-httplib answers some requests itself (an unknown path: 404; a POST it cannot read a body from: 400) with
    // an empty body: answer as FastAPI does (both SGLang and vLLM are FastAPI apps), naming the request.
    http_.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      const std::string detail = res.status == 404 ? "Not Found" : fmt::format("{} {}: refused", req.method, req.path);
      res.set_content(json{{"detail", detail}}.dump(), "application/json");
    });
  }

  httplib::Server& http() { return http_; }

 private:
  void add(Route route) {
    if (route.path == "/health") has_health_ = true;
    auto handler = [this, route](const httplib::Request& req, httplib::Response& res) {
      HttpRequest request;
      request.method = req.method;
      request.path = route.path;
      for (const auto& [k, v] : req.params) request.query.emplace_back(k, v);
      request.extras = req.get_header_value("X-Wsbench-Extras") == "1";
      if (route.path == "/health") {
        health_faults();
        if (options_.faults.never_healthy) return send(res, json_reply(503, json{{"detail", "fault never-healthy"}}));
      }
      const std::string endpoint = request.endpoint();
      const auto fault = options_.faults.endpoint.find(route.path);
      if (fault != options_.faults.endpoint.end()) {
        if (fault->second == "non-json") return send(res, HttpReply{200, "text/html", "<html>fault non-json</html>"});
        if (fault->second == "wrong-shape") return send(res, json_reply(200, json{{"unexpected", true}}));
        if (fault->second == "http-500") {
          return send(res, HttpReply{500, "text/plain", fmt::format("{}: fault http-500 Internal Server Error", endpoint)});
        }
        if (fault->second == "http-404") return send(res, json_reply(404, json{{"detail", "Not Found"}}));
        if (fault->second == "refuse") {
          return send(res, json_reply(400, json{{"success", false}, {"message", endpoint + ": fault refuse"}}));
        }
      }
      if (!req.body.empty()) {
        try {
          request.body = json::parse(req.body);
        } catch (const json::exception& e) {  // parse_error, and out_of_range for a number beyond double (1e999)
          // FastAPI's answer to a body it cannot decode: 422 with a `detail` list.
          return send(res, json_reply(422, json{{"detail", json::array({{{"type", "json_invalid"},
                                                                          {"loc", json::array({"body"})},
                                                                          {"msg", fmt::format("JSON decode error: {}", e.what())}}})}}));
        }
      }
      HttpReply reply;
      try {
        reply = route.handler(request);
      } catch (const Error& e) {
        reply = json_reply(http_status(e.kind()), json{{"success", false}, {"message", e.what()}});
      } catch (const std::exception& e) {
        reply = json_reply(500, json{{"success", false}, {"message", fmt::format("{}: {}", endpoint, e.what())}});
      }
      if (fault != options_.faults.endpoint.end() && fault->second == "missing-field") {
        reply.body = without_first_field(reply.body);
      }
      send(res, reply);
    };
    if (route.method == "GET") {
      http_.Get(route.path, handler);
    } else {
      http_.Post(route.path, handler);
    }
  }

  void health_faults() {
    if (options_.faults.slow_health_s) {
      std::this_thread::sleep_for(std::chrono::duration<double>(*options_.faults.slow_health_s));
    }
  }

  void health(httplib::Response& res) {
    health_faults();
    if (options_.faults.never_healthy) return send(res, json_reply(503, json{{"detail", "fault never-healthy"}}));
    // SGLang and vLLM answer an empty 200 while serving; 503 once the engine stopped.
    if (!engine_.healthy()) return send(res, HttpReply{503, "text/plain", "the engine stopped serving"});
    send(res, HttpReply{200, "text/plain", ""});
  }

  ServeOptions options_;
  Engine& engine_;
  ServeState state_;
  httplib::Server http_;
  std::vector<PhaseRecord> boot_phases_;
  bool has_health_ = false;
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
  } else if (colon != std::string::npos &&
             (kind == "non-json" || kind == "wrong-shape" || kind == "http-500" || kind == "http-404" ||
              kind == "missing-field" || kind == "refuse") &&
             colon + 1 < text.size() && text[colon + 1] == '/') {
    faults.endpoint[text.substr(colon + 1)] = kind;
  } else {
    throw Error(ErrorKind::Format,
                fmt::format("--fault '{}' is unknown (die-in-commit, fail-in-commit, never-healthy, version-backwards, "
                            "slow-health=S, non-json:/path, wrong-shape:/path, http-500:/path, http-404:/path, "
                            "missing-field:/path, refuse:/path)",
                            text));
  }
}

int serve(const ServeOptions& options) {
  // SIGTERM/SIGINT are taken by one watcher thread; every other thread (engine, pool) inherits the blocked mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  make_protocol(options.protocol);  // an unknown protocol is refused before the boot
  EngineOptions engine_options = options.engine;
  if (options.faults.fail_in_commit && options.version == 0) {
    engine_options.fault_hook = fail_in_commit_hook(options.engine.tp - 1);
  }
  Engine engine(std::move(engine_options));
  const LoadReport load = engine.load_native(options.checkpoint, options.version);
  Server server(options, engine, load.phases);
  httplib::Server& http = server.http();
  // cpp-httplib's default options add SO_REUSEPORT, which lets a second server (a stale one, or a typo'd port)
  // share this port and silently take part of a run's requests: keep SO_REUSEADDR (fast restarts) only.
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void*>(&yes), sizeof yes);
  });
  int port = options.port;
  errno = 0;
  if (port == 0) {
    port = http.bind_to_any_port(options.host);
  } else if (!http.bind_to_port(options.host, port)) {
    port = -1;
  }
  if (port < 0) {
    const int err = errno;
    throw Error(ErrorKind::Io, fmt::format("wsbench serve: cannot listen on {}:{}{}", options.host, options.port,
                                           err != 0 ? fmt::format(" ({})", std::strerror(err)) : std::string()));
  }
  std::cout << fmt::format("wsbench serve: listening on {}:{} ({} {} over {}, {})", options.host, port,
                           options.engine.profile.id, options.engine.sync.label(), options.protocol,
                           version_string(options.version))
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
