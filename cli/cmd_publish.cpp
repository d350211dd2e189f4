// `wsbench publish`: synthetic publications of a profile (--model), or real consecutive checkpoints
// (--from-checkpoints); one table row per version, the changed elements per class of codes under it.
#include <fmt/format.h>

#include <charconv>
#include <fstream>
#include <iostream>

#include "cli/commands.hpp"
#include "core/errors.hpp"
#include "harness/publication_record.hpp"
#include "publisher/checkpoint_publisher.hpp"
#include "publication/tensor_checksum.hpp"
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

std::string percent(uint64_t part, uint64_t whole) {
  return whole == 0 ? std::string("n/a") : fmt::format("{:.4f}%", 100.0 * static_cast<double>(part) / whole);
}

void print_stats(const std::vector<PublicationStats>& stats) {
  std::cout << fmt::format("# {:<8} {:<6} {:<9} {:>14} {:>14} {:>11} {:>12} {:>10} {:>9}\n", "version", "kind",
                           "encoding", "canonical", "stored", "compression", "changed", "density", "time");
  std::cout << fmt::format("# {:<8} {:<6} {:<9} {:>14} {:>14} {:>11} {:>12} {:>10} {:>9}\n", "", "", "", "(bytes)",
                           "(bytes)", "(x)", "(elements)", "", "(s)");
  for (const auto& s : stats) {
    uint64_t elements = 0;
    for (const auto& [name, count] : s.changes) elements += count.elements;
    const std::string encoding = s.encoding ? std::string(delta_encoding_name(*s.encoding)) : "-";
    std::cout << fmt::format("  {:<8} {:<6} {:<9} {:>14} {:>14} {:>11.2f} {:>12} {:>10} {:>9.3f}\n", s.version,
                             s.full ? "FULL" : "DELTA", encoding, s.canonical_bytes, s.stored_bytes,
                             s.compression_ratio(), s.changed_values, percent(s.changed_values, elements), s.seconds);
    for (const auto& [name, count] : s.changes) {
      std::cout << fmt::format("    {:<8} {} of {} elements changed ({})\n", name, count.changed, count.elements,
                               percent(count.changed, count.elements));
    }
    if (s.payload_bytes.size() > 1) {
      std::vector<std::string> tried;
      for (const auto& [name, bytes] : s.payload_bytes) tried.push_back(fmt::format("{} {}", name, bytes));
      std::cout << fmt::format("    payload bytes: {} (kept {})\n", fmt::join(tried, ", "), encoding);
    }
  }
}

void write_json(const std::filesystem::path& path, const std::vector<PublicationStats>& stats) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : stats) out.push_back(publication_json(s));
  std::ofstream f(path, std::ios::trunc);
  f << out.dump(2) << "\n";
  if (!f) throw Error(ErrorKind::Io, fmt::format("cannot write {}", path.string()));
}

[[noreturn]] void refuse(const std::string& what) { throw Error(ErrorKind::Format, what); }

std::vector<PublicationStats> publish_checkpoints(const PublishArgs& args) {
  if (!args.model.empty()) refuse("--model and --from-checkpoints exclude each other (the checkpoints are the model)");
  if (args.from_checkpoints.size() < 2) {
    refuse(fmt::format("--from-checkpoints: {} directory given, at least 2 (FULL v0 from the first, one DELTA per "
                       "following one)",
                       args.from_checkpoints.size()));
  }
  for (const auto& [set, name] : {std::pair{args.versions.has_value(), "--versions"}, {args.seed.has_value(), "--seed"},
                                  {args.density.has_value(), "--density"}, {args.layers.has_value(), "--layers"},
                                  {args.experts.has_value(), "--experts"}}) {
    if (set) refuse(fmt::format("{} has no meaning with --from-checkpoints (the checkpoints are the versions)", name));
  }
  if (args.frame_bytes != 0) refuse("--frame-bytes: checkpoint publications write one zstd frame per payload");
  if (args.checksum_range_bytes != 0) {
    refuse("--checksum-range-bytes: checkpoint publications write one xxh3-128 per tensor");
  }
  CheckpointPublishOptions options;
  options.store = args.store;
  options.encoding = parse_delta_encoding(args.encoding);  // nullopt for "auto"
  options.fsync = args.fsync;
  options.threads = args.threads;
  return publish_from_checkpoints(args.from_checkpoints, options);
}

std::vector<PublicationStats> publish_synthetic(const std::filesystem::path& profiles_dir, const PublishArgs& args) {
  if (args.model.empty()) refuse("--model ID or --from-checkpoints DIR0 DIR1 ... is required");
  if (args.encoding == "auto") refuse("--encoding auto needs --from-checkpoints (synthetic versions use one encoding)");
  ModelProfile profile = find_profile(args.model, profiles_dir);
  if (args.layers || args.experts) profile = scale_profile(profile, ProfileScale{args.layers, args.experts});
  PublishOptions options;
  options.store = args.store;
  const std::string versions = args.versions.value_or("0..3");
  const auto dots = versions.find("..");
  if (dots == std::string::npos) {
    // "N" means what a matrix's publish_versions N means: FULL v0 and DELTA v1..vN. One version alone is "N..N".
    options.first_version = 0;
    options.last_version = parse_u32(versions, "N");
  } else {
    options.first_version = parse_u32(std::string_view(versions).substr(0, dots), "A of A..B");
    options.last_version = parse_u32(std::string_view(versions).substr(dots + 2), "B of A..B");
  }
  if (options.last_version < options.first_version) {
    throw Error(ErrorKind::Format, fmt::format("--versions {}: last version before first", versions));
  }
  options.seed = args.seed.value_or(0);
  auto encoding = parse_delta_encoding(args.encoding);
  if (!encoding) throw Error(ErrorKind::Format, fmt::format("--encoding '{}': expected xor or overwrite", args.encoding));
  options.encoding = *encoding;
  if (std::string problem = frame_bytes_problem(args.frame_bytes); !problem.empty()) {
    throw Error(ErrorKind::Format, "--frame-bytes " + problem);
  }
  options.frame_bytes = args.frame_bytes;
  if (std::string problem = checksum_range_bytes_problem(args.checksum_range_bytes); !problem.empty()) {
    throw Error(ErrorKind::Format, "--checksum-range-bytes " + problem);
  }
  options.checksum_range_bytes = args.checksum_range_bytes;
  options.density = args.density;
  options.fsync = args.fsync;
  options.threads = args.threads;
  return publish(profile, options);
}

}  // namespace

int cmd_publish(const std::filesystem::path& profiles_dir, const PublishArgs& args) {
  const auto stats =
      args.from_checkpoints.empty() ? publish_synthetic(profiles_dir, args) : publish_checkpoints(args);
  print_stats(stats);
  if (!args.json.empty()) write_json(args.json, stats);
  std::cout << fmt::format("store {} latest -> {:06}\n", args.store.string(), stats.back().version);
  return 0;
}

}  // namespace wsb
