#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.hpp"
#include "models/checkpoint/checkpoint.hpp"
#include "publication/store.hpp"
#include "engine_api/serve.hpp"
#include "core/errors.hpp"

namespace wsb {

namespace {

/// The update endpoints have no authentication: the server listens on loopback only.
bool is_loopback(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  unsigned a = 0, b = 0, c = 0, d = 0;
  char tail = 0;
  return std::sscanf(host.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 && a == 127 && b < 256 && c < 256 &&
         d < 256;
}

/// --version against the version the checkpoint's index records (publication format: metadata "version", 6
/// digits); the index's version when --version is absent; 0 for a checkpoint that records none.
uint32_t boot_version(const std::filesystem::path& checkpoint, std::optional<uint32_t> given) {
  const std::filesystem::path index_path = checkpoint / kIndexFileName;
  std::optional<uint32_t> recorded;
  if (std::filesystem::exists(index_path)) {
    const CheckpointIndex index = read_checkpoint_index(index_path);
    if (auto it = index.metadata.find("version"); it != index.metadata.end()) {
      recorded = parse_version_string(it->second, fmt::format("{}: metadata field 'version'", index_path.string()));
    }
  }
  if (given && recorded && *given != *recorded) {
    throw Error(ErrorKind::Mismatch, fmt::format("wsbench serve: --version {} but {} records version {}", *given,
                                                 index_path.string(), version_string(*recorded)));
  }
  return given ? *given : recorded.value_or(0);
}

}  // namespace

int cmd_serve(const std::filesystem::path& profiles_dir, const ServeArgs& args) {
  if (!is_loopback(args.host)) {
    throw Error(ErrorKind::Format, fmt::format("wsbench serve: --host '{}' is not a loopback address (127.0.0.0/8, "
                                               "::1, localhost): the weight-update endpoints have no authentication",
                                               args.host));
  }
  args.sync.validate("wsbench serve");
  ModelProfile profile = find_profile(args.model, profiles_dir);
  if (args.layers || args.experts) profile = scale_profile(profile, ProfileScale{args.layers, args.experts});
  ServeOptions options;
  options.protocol = args.protocol;
  options.weight_version = args.weight_version;
  options.engine = EngineOptions{profile, args.tp, args.sync, args.store, args.workdir, args.prepare_threads};
  options.engine.backend = args.backend;
  options.checkpoint = args.checkpoint;
  options.version = boot_version(args.checkpoint, args.version);
  options.host = args.host;
  options.port = args.port;
  for (const auto& fault : args.faults) parse_serve_fault(fault, options.faults);
  std::filesystem::create_directories(args.workdir);
  return serve(options);
}

}  // namespace wsb
