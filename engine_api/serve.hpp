#pragma once
// `wsbench serve`: the embedded engine behind the HTTP engine API (engine_api/http_api.hpp) on one address, so the
// HTTP adapter and the profiler can be validated against a real server process. Requests run on the server's
// thread pool: a prepare blocks only its own request while /generate keeps answering.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.hpp"

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
  std::map<std::string, std::string> endpoint;  ///< "non-json:/path" | "wrong-shape:/path" | "http-500:/path"
};

/// Parses one --fault value (see ServeFaults) into `faults`. Throws Error(Format) naming the value.
void parse_serve_fault(const std::string& text, ServeFaults& faults);

struct ServeOptions {
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
