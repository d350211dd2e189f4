#include "core/sync_options.hpp"

#include <fmt/format.h>

#include <limits>

#include "core/errors.hpp"

namespace wsb {
namespace {

template <typename Enum>
Enum parse_name(std::string_view name, const std::vector<std::string>& names, const char* what) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<Enum>(i);
  }
  throw Error(ErrorKind::Format, fmt::format("unknown {} '{}' ({})", what, name, fmt::join(names, ", ")));
}

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw Error(ErrorKind::Format, fmt::format("{}: {}", where, what));
}

std::string string_field(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.at(key).is_string()) fail(where, fmt::format("field '{}' must be a string, got {}", key, j.at(key).dump()));
  return j.at(key).get<std::string>();
}

template <typename T>
T integer_field(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto& v = j.at(key);
  if (!v.is_number_integer()) fail(where, fmt::format("field '{}' must be an integer, got {}", key, v.dump()));
  // A non-negative value built in memory from a signed field is a signed JSON integer; text parses as unsigned.
  if (!v.is_number_unsigned() && v.get<int64_t>() < 0) {
    fail(where, fmt::format("field '{}' must be >= 0, got {}", key, v.dump()));
  }
  if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
    fail(where, fmt::format("field '{}' is too large: {}", key, v.dump()));
  }
  return static_cast<T>(v.get<uint64_t>());
}

template <typename Enum>
Enum enum_field(const nlohmann::json& j, const char* key, const std::string& where,
                Enum (*parse)(std::string_view)) {
  const std::string text = string_field(j, key, where);
  try {
    return parse(text);
  } catch (const Error& e) {
    fail(where, fmt::format("field '{}': {}", key, e.what()));
  }
}

}  // namespace

const std::vector<std::string>& sync_mode_names() {
  static const std::vector<std::string> names{"disk", "cpu", "refit"};
  return names;
}

const std::vector<std::string>& commit_strategy_names() {
  static const std::vector<std::string> names{"full", "device-delta"};
  return names;
}

const std::vector<std::string>& refit_transport_names() {
  static const std::vector<std::string> names{"inproc", "shm", "cuda-ipc"};
  return names;
}

const std::string& name_of(SyncModeKind mode) { return sync_mode_names().at(static_cast<size_t>(mode)); }
const std::string& name_of(CommitStrategy strategy) { return commit_strategy_names().at(static_cast<size_t>(strategy)); }
const std::string& name_of(RefitTransport transport) { return refit_transport_names().at(static_cast<size_t>(transport)); }

SyncModeKind parse_sync_mode(std::string_view name) {
  return parse_name<SyncModeKind>(name, sync_mode_names(), "mode");
}
CommitStrategy parse_commit_strategy(std::string_view name) {
  return parse_name<CommitStrategy>(name, commit_strategy_names(), "strategy");
}
RefitTransport parse_refit_transport(std::string_view name) {
  return parse_name<RefitTransport>(name, refit_transport_names(), "transport");
}

std::string SyncOptions::label() const {
  switch (mode) {
    case SyncModeKind::Refit: return name_of(mode) + "+" + name_of(refit.transport);
    case SyncModeKind::Cpu:
      if (cpu.commit_strategy != CommitStrategy::Full) return name_of(mode) + "+" + name_of(cpu.commit_strategy);
      return name_of(mode);
    case SyncModeKind::Disk: break;
  }
  return name_of(mode);
}

void SyncOptions::validate(const std::string& where) const {
  const std::string& m = name_of(mode);
  if (mode != SyncModeKind::Cpu && cpu != CpuSyncOptions{}) {
    fail(where, fmt::format("fields 'commit_strategy' and 'delta_staging_bytes' apply to mode cpu only (mode is '{}')", m));
  }
  if (mode == SyncModeKind::Cpu && cpu.commit_strategy == CommitStrategy::Full && cpu.delta_staging_bytes != 0) {
    fail(where, "field 'delta_staging_bytes' applies to commit_strategy 'device-delta' only");
  }
  if (mode != SyncModeKind::Refit && (refit.transport != RefitTransport::Inproc || refit.bucket_bytes != 0)) {
    fail(where, fmt::format("fields 'transport' and 'bucket_bytes' apply to mode refit only (mode is '{}')", m));
  }
  if (refit.base_gpu_id < 0) fail(where, fmt::format("field 'base_gpu_id' must be >= 0, got {}", refit.base_gpu_id));
  if (refit.base_gpu_id != 0 && (mode != SyncModeKind::Refit || refit.transport != RefitTransport::CudaIpc)) {
    fail(where, fmt::format("field 'base_gpu_id' applies to transport cuda-ipc only (transport is '{}')",
                            mode == SyncModeKind::Refit ? name_of(refit.transport) : std::string("none")));
  }
}

const std::vector<std::string>& sync_field_names() {
  static const std::vector<std::string> names{"mode",      "commit_strategy", "delta_staging_bytes",
                                              "transport", "bucket_bytes",    "base_gpu_id"};
  return names;
}

void write_sync_fields(const SyncOptions& options, nlohmann::json& j) {
  j["mode"] = name_of(options.mode);
  if (options.mode == SyncModeKind::Cpu && options.cpu.commit_strategy != CommitStrategy::Full) {
    j["commit_strategy"] = name_of(options.cpu.commit_strategy);
    if (options.cpu.delta_staging_bytes > 0) j["delta_staging_bytes"] = options.cpu.delta_staging_bytes;
  }
  if (options.mode == SyncModeKind::Refit) {
    j["transport"] = name_of(options.refit.transport);
    j["bucket_bytes"] = options.refit.bucket_bytes;
    if (options.refit.transport == RefitTransport::CudaIpc) j["base_gpu_id"] = options.refit.base_gpu_id;
  }
}

void read_sync_fields(const nlohmann::json& j, SyncOptions& options, const std::string& where) {
  if (!j.is_object()) fail(where, "must be an object");
  if (j.contains("mode")) options.mode = enum_field(j, "mode", where, &parse_sync_mode);
  if (j.contains("commit_strategy")) {
    options.cpu.commit_strategy = enum_field(j, "commit_strategy", where, &parse_commit_strategy);
  }
  if (j.contains("delta_staging_bytes")) {
    options.cpu.delta_staging_bytes = integer_field<uint64_t>(j, "delta_staging_bytes", where);
  }
  if (j.contains("transport")) options.refit.transport = enum_field(j, "transport", where, &parse_refit_transport);
  if (j.contains("bucket_bytes")) options.refit.bucket_bytes = integer_field<uint64_t>(j, "bucket_bytes", where);
  if (j.contains("base_gpu_id")) options.refit.base_gpu_id = integer_field<int>(j, "base_gpu_id", where);
}

std::string cell_mode_label(const SyncOptions& sync, std::string_view protocol, std::optional<PauseMode> pause) {
  std::string label = sync.label();
  if (!protocol.empty()) label += "@" + std::string(protocol);
  if (pause) label += ":" + std::string(name_of(*pause));
  return label;
}

}  // namespace wsb
