#include <fmt/format.h>

#include <charconv>
#include <iostream>

#include "cli/commands.hpp"
#include "core/errors.hpp"
#include "publisher/publisher.hpp"

namespace wsb {

namespace {

uint32_t parse_u32(std::string_view text, const std::string& what) {
  uint32_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    throw Error(ErrorKind::Format, fmt::format("--versions: '{}' is not a version number ({})", text, what));
  }
  return v;
}

}  // namespace

int cmd_publish(const std::filesystem::path& profiles_dir, const PublishArgs& args) {
  ModelProfile profile = find_profile(args.model, profiles_dir);
  if (args.layers || args.experts) profile = scale_profile(profile, ProfileScale{args.layers, args.experts});
  PublishOptions options;
  options.store = args.store;
  const auto dots = args.versions.find("..");
  if (dots == std::string::npos) {
    options.first_version = options.last_version = parse_u32(args.versions, "N");
  } else {
    options.first_version = parse_u32(std::string_view(args.versions).substr(0, dots), "A of A..B");
    options.last_version = parse_u32(std::string_view(args.versions).substr(dots + 2), "B of A..B");
  }
  if (options.last_version < options.first_version) {
    throw Error(ErrorKind::Format, fmt::format("--versions {}: last version before first", args.versions));
  }
  options.seed = args.seed;
  auto encoding = parse_delta_encoding(args.encoding);
  if (!encoding) throw Error(ErrorKind::Format, fmt::format("--encoding '{}': expected xor or overwrite", args.encoding));
  options.encoding = *encoding;
  options.frame_bytes = args.frame_bytes;
  options.density = args.density;
  options.fsync = args.fsync;
  options.threads = args.threads;
  const auto stats = publish(profile, options);
  std::cout << fmt::format("# {:<8} {:<6} {:>16} {:>16} {:>14} {:>9}\n", "version", "kind", "canonical", "stored",
                           "changed", "time");
  std::cout << fmt::format("# {:<8} {:<6} {:>16} {:>16} {:>14} {:>9}\n", "", "", "(bytes)", "(bytes)", "(values)", "(s)");
  for (const auto& s : stats) {
    std::cout << fmt::format("  {:<8} {:<6} {:>16} {:>16} {:>14} {:>9.3f}\n", s.version, s.full ? "FULL" : "DELTA",
                             s.canonical_bytes, s.stored_bytes, s.changed_values, s.seconds);
  }
  std::cout << fmt::format("store {} latest -> {:06}\n", args.store.string(), options.last_version);
  return 0;
}

}  // namespace wsb
