#pragma once
// `wsbench serve`: the embedded engine behind one real weight-update protocol's HTTP API (--protocol, the routes
// of engine_api/protocols/) plus wsbench's extras (engine_api/wsbench_extras.hpp) on one address, so every HTTP
// adapter and the profiler can be validated against a server process. Requests run on the server's thread pool: a
// prepare blocks only its own request while generation keeps answering.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.hpp"
#include "engine_api/protocols/protocol.hpp"

namespace wsb {

/// Failures a test asks `wsbench serve` to show (--fault, repeatable). They apply only to a server booted at
/// version 0 (a trial's server), never to one booted on another version (the profiler's reference server).
struct ServeFaults {
  bool die_in_commit = false;               ///< "die-in-commit": the process exits (status 17) inside the pause
  /// "fail-in-commit": the last TP rank fails right after its first storage was written (inside the pause, so
  /// mutation started): the engine stops serving (/health 503, /generate 500) and the process keeps running.
  bool fail_in_commit = false;
  std::optional<double> slow_health_s;      ///< "slow-health=S": every /health answer waits S seconds
  bool never_healthy = false;               ///< "never-healthy": /health answers 503
  bool version_backwards = false;           ///< "version-backwards": after a commit every 2nd /generate reports
                                            ///< the previous version
  /// "non-json:/path" | "wrong-shape:/path" | "http-500:/path" | "http-404:/path" | "missing-field:/path"
  /// (the route's answer without its first field) | "refuse:/path" (HTTP 400 with the protocol's refusal body).
  std::map<std::string, std::string> endpoint;
};

/// Parses one --fault value (see ServeFaults) into `faults`. Throws Error(Format) naming the value.
void parse_serve_fault(const std::string& text, ServeFaults& faults);

struct ServeOptions {
  std::string protocol = "stitch-staging";  ///< engine_api/protocols/protocol.hpp protocol_names()
  /// The version text reported at boot (a real server's --weight-version); nullopt: "default", as SGLang.
  std::optional<std::string> weight_version;
  EngineOptions engine;
  std::filesystem::path checkpoint;  ///< FULL checkpoint of the boot (native load)
  uint32_t version = 0;              ///< version of `checkpoint`
  std::string host = "127.0.0.1";
  int port = 0;                      ///< 0: any free port (printed on stdout)
  ServeFaults faults;
};

/// Boots the engine, prints "wsbench serve: listening on HOST:PORT" on stdout and serves until SIGTERM or SIGINT;
/// returns the exit code (0 after a signal). Throws Error for a failed boot (the engine's errors) and Error(Io)
/// when the address cannot be bound.
int serve(const ServeOptions& options);

}  // namespace wsb
