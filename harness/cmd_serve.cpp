#include <fmt/format.h>

#include "harness/commands.hpp"
#include "harness/serve.hpp"
#include "models/core/errors.hpp"

namespace wsb {

int cmd_serve(const std::filesystem::path& profiles_dir, const ServeArgs& args) {
  ModelProfile profile = find_profile(args.model, profiles_dir);
  if (args.layers || args.experts) profile = scale_profile(profile, ProfileScale{args.layers, args.experts});
  ServeOptions options;
  options.engine = EngineOptions{profile, args.tp, args.mode, args.store, args.workdir, args.prepare_threads};
  options.engine.backend = args.backend;
  options.checkpoint = args.checkpoint;
  options.version = args.version;
  options.host = args.host;
  options.port = args.port;
  for (const auto& fault : args.faults) parse_serve_fault(fault, options.faults);
  std::filesystem::create_directories(args.workdir);
  return serve(options);
}

}  // namespace wsb
