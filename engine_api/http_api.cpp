#include "engine_api/http_api.hpp"

#include <fmt/format.h>

#include <chrono>
#include <limits>

#include "core/phase_log.hpp"
#include "publication/store.hpp"

namespace wsb::api {
namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw Error(ErrorKind::Format, fmt::format("{}: {}", where, what));
}

const json& object(const json& j, const std::string& where, const std::string& name) {
  if (!j.is_object()) fail(where, fmt::format("{} must be a JSON object, got {}", name, j.type_name()));
  return j;
}

const json& field(const json& j, const std::string& key, const std::string& where, const std::string& prefix = "") {
  auto it = j.find(key);
  if (it == j.end()) fail(where, fmt::format("field '{}{}' is missing", prefix, key));
  return *it;
}

int64_t integer(const json& v, const std::string& name, const std::string& where, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) fail(where, fmt::format("field '{}' must be an integer, got {}", name, v.dump()));
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) fail(where, fmt::format("field '{}' must be {}..{}, got {}", name, lo, hi, x));
  return x;
}

double number(const json& v, const std::string& name, const std::string& where) {
  if (!v.is_number()) fail(where, fmt::format("field '{}' must be a number, got {}", name, v.dump()));
  return v.get<double>();
}

bool boolean(const json& v, const std::string& name, const std::string& where) {
  if (!v.is_boolean()) fail(where, fmt::format("field '{}' must be true or false, got {}", name, v.dump()));
  return v.get<bool>();
}

std::string string(const json& v, const std::string& name, const std::string& where) {
  if (!v.is_string()) fail(where, fmt::format("field '{}' must be a string, got {}", name, v.dump()));
  return v.get<std::string>();
}

const json& array(const json& v, const std::string& name, const std::string& where) {
  if (!v.is_array()) fail(where, fmt::format("field '{}' must be an array, got {}", name, v.type_name()));
  return v;
}

std::vector<int32_t> ids(const json& v, const std::string& name, const std::string& where) {
  std::vector<int32_t> out;
  for (const auto& e : array(v, name, where)) {
    out.push_back(static_cast<int32_t>(integer(e, name + "[]", where, 0, std::numeric_limits<int32_t>::max())));
  }
  return out;
}

void require_success(const json& j, const std::string& where) {
  object(j, where, "the response");
  if (!boolean(field(j, "success", where), "success", where)) {
    fail(where, fmt::format("success is false: {}", j.value("message", std::string("(no message)"))));
  }
}

/// CLOCK_MONOTONIC seconds (std::chrono::steady_clock's epoch, shared by every process of the host) minus this
/// process's steady_seconds(), whose epoch is the process's first call.
double monotonic_offset() {
  static const double offset = [] {
    const double process = steady_seconds();
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count() - process;
  }();
  return offset;
}

}  // namespace

uint32_t parse_version(const json& j, const std::string& where) {
  if (j.is_number_integer()) {
    const int64_t x = j.get<int64_t>();
    if (x < 0 || x > std::numeric_limits<uint32_t>::max()) fail(where, fmt::format("version {} out of range", x));
    return static_cast<uint32_t>(x);
  }
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) {
      fail(where, fmt::format("'{}' is not a version (decimal digits)", s));
    }
    return static_cast<uint32_t>(std::stoul(s));
  }
  fail(where, fmt::format("a version must be an integer or a string of digits, got {}", j.dump()));
}

json version_json(uint32_t version) { return version_string(version); }

std::optional<ErrorKind> parse_error_kind(const std::string& name) {
  for (ErrorKind kind : {ErrorKind::Format, ErrorKind::Truncated, ErrorKind::Checksum, ErrorKind::Lineage,
                         ErrorKind::State, ErrorKind::Missing, ErrorKind::Mismatch, ErrorKind::Io, ErrorKind::Fatal,
                         ErrorKind::Resource}) {
    if (name == error_kind_name(kind)) return kind;
  }
  return std::nullopt;
}

json generate_request_json(const GenerateRequest& request) {
  return {{"input_ids", request.input_ids},
          {"sampling_params", {{"max_new_tokens", request.max_new_tokens}, {"temperature", 0}}},
          {"return_logprob", request.return_logprob}};
}

GenerateRequest parse_generate_request(const json& j, const std::string& where) {
  object(j, where, "the request");
  GenerateRequest r;
  r.input_ids = ids(field(j, "input_ids", where), "input_ids", where);
  if (j.contains("sampling_params")) {
    const json& sp = object(j["sampling_params"], where, "field 'sampling_params'");
    if (sp.contains("max_new_tokens")) {
      r.max_new_tokens = static_cast<int>(integer(sp["max_new_tokens"], "sampling_params.max_new_tokens", where, 1, 1 << 20));
    }
    if (sp.contains("temperature") && number(sp["temperature"], "sampling_params.temperature", where) != 0.0) {
      fail(where, "field 'sampling_params.temperature' must be 0 (greedy decoding only)");
    }
  }
  if (j.contains("return_logprob")) r.return_logprob = boolean(j["return_logprob"], "return_logprob", where);
  return r;
}

json generate_response_json(const GenerateResponse& response) {
  json logprobs = json::array();
  for (size_t i = 0; i < response.logprobs.size() && i < response.output_ids.size(); ++i) {
    logprobs.push_back(json::array({response.logprobs[i], response.output_ids[i], nullptr}));
  }
  json step_times = json::array();
  for (double t : response.step_times) step_times.push_back(t + monotonic_offset());
  json meta{{"weight_version", version_json(response.weight_version)},
            {"completion_tokens", response.output_ids.size()},
            {"wsbench_step_times", step_times},
            {"wsbench_restarts", response.restarts}};
  if (!response.logprobs.empty()) meta["output_token_logprobs"] = logprobs;
  return {{"text", response.text}, {"output_ids", response.output_ids}, {"meta_info", meta}};
}

GenerateResponse parse_generate_response(const json& j, const std::string& where) {
  object(j, where, "the response");
  GenerateResponse r;
  r.text = string(field(j, "text", where), "text", where);
  r.output_ids = ids(field(j, "output_ids", where), "output_ids", where);
  const json& meta = object(field(j, "meta_info", where), where, "field 'meta_info'");
  r.weight_version = parse_version(field(meta, "weight_version", where, "meta_info."),
                                   where + ": field 'meta_info.weight_version'");
  if (meta.contains("output_token_logprobs")) {
    const json& lps = array(meta["output_token_logprobs"], "meta_info.output_token_logprobs", where);
    if (lps.size() != r.output_ids.size()) {
      fail(where, fmt::format("field 'meta_info.output_token_logprobs' has {} entries for {} output_ids", lps.size(),
                              r.output_ids.size()));
    }
    for (size_t i = 0; i < lps.size(); ++i) {
      const std::string name = fmt::format("meta_info.output_token_logprobs[{}]", i);
      if (!lps[i].is_array() || lps[i].size() < 2) fail(where, fmt::format("field '{}' must be [logprob, token_id, ...]", name));
      r.logprobs.push_back(static_cast<float>(number(lps[i][0], name + "[0]", where)));
      if (integer(lps[i][1], name + "[1]", where, 0, std::numeric_limits<int32_t>::max()) != r.output_ids[i]) {
        fail(where, fmt::format("field '{}' names token {} but output_ids[{}] is {}", name, lps[i][1].dump(), i,
                                r.output_ids[i]));
      }
    }
  }
  if (meta.contains("wsbench_step_times")) {
    for (const auto& t : array(meta["wsbench_step_times"], "meta_info.wsbench_step_times", where)) {
      r.step_times.push_back(number(t, "meta_info.wsbench_step_times[]", where) - monotonic_offset());
    }
  }
  if (meta.contains("wsbench_restarts")) {
    r.restarts = static_cast<int>(integer(meta["wsbench_restarts"], "meta_info.wsbench_restarts", where, 0, 1 << 30));
  }
  return r;
}

json phases_json(const std::vector<PhaseRecord>& phases) {
  json out = json::array();
  for (const auto& p : phases) {
    out.push_back({{"name", p.name}, {"seconds", p.seconds}, {"bytes", p.bytes}, {"floor", floor_name(p.floor)}});
  }
  return out;
}

std::vector<PhaseRecord> parse_phases(const json& j, const std::string& where) {
  std::vector<PhaseRecord> out;
  for (const auto& p : array(j, "wsbench_phases", where)) {
    object(p, where, "a phase");
    PhaseRecord r;
    r.name = string(field(p, "name", where, "wsbench_phases[]."), "wsbench_phases[].name", where);
    r.seconds = number(field(p, "seconds", where, "wsbench_phases[]."), "wsbench_phases[].seconds", where);
    r.bytes = static_cast<uint64_t>(integer(field(p, "bytes", where, "wsbench_phases[]."), "wsbench_phases[].bytes",
                                            where, 0, std::numeric_limits<int64_t>::max()));
    const std::string floor = p.value("floor", std::string("none"));
    for (Floor f : {Floor::None, Floor::HostMemcpy, Floor::DiskRead, Floor::H2D}) {
      if (floor == floor_name(f)) r.floor = f;
    }
    out.push_back(std::move(r));
  }
  return out;
}

json prepare_response_json(const PrepareReport& report) {
  return {{"success", true},
          {"message", report.already_prepared ? "already prepared" : "prepared"},
          {"target_version", version_json(report.target)},
          {"already_prepared", report.already_prepared},
          {"wsbench_seconds", report.seconds},
          {"wsbench_phases", phases_json(report.phases)}};
}

PrepareReport parse_prepare_response(const json& j, uint32_t target, const std::string& where) {
  require_success(j, where);
  PrepareReport r;
  r.target = target;
  if (j.contains("already_prepared")) r.already_prepared = boolean(j["already_prepared"], "already_prepared", where);
  if (j.contains("wsbench_seconds")) r.seconds = number(j["wsbench_seconds"], "wsbench_seconds", where);
  if (j.contains("wsbench_phases")) r.phases = parse_phases(j["wsbench_phases"], where);
  return r;
}

json commit_response_json(const CommitReport& report) {
  return {{"success", true},
          {"message", "committed"},
          {"weight_version", version_json(report.target)},
          {"wsbench_seconds", report.seconds},
          {"wsbench_pause_seconds", report.pause_seconds},
          {"wsbench_phases", phases_json(report.phases)}};
}

CommitReport parse_commit_response(const json& j, uint32_t target, const std::string& where) {
  require_success(j, where);
  CommitReport r;
  r.target = target;
  if (j.contains("weight_version")) {
    const uint32_t v = parse_version(j["weight_version"], where + ": field 'weight_version'");
    if (v != target) fail(where, fmt::format("committed {} but weight_version is {}", version_string(target), version_string(v)));
  }
  if (j.contains("wsbench_seconds")) r.seconds = number(j["wsbench_seconds"], "wsbench_seconds", where);
  if (j.contains("wsbench_pause_seconds")) r.pause_seconds = number(j["wsbench_pause_seconds"], "wsbench_pause_seconds", where);
  if (j.contains("wsbench_phases")) r.phases = parse_phases(j["wsbench_phases"], where);
  return r;
}

json checksums_json(const std::vector<std::map<std::string, std::string>>& checksums) {
  return {{"success", true}, {"checksum_format", "xxh3-128"}, {"checksums", checksums}};
}

std::vector<std::map<std::string, std::string>> parse_checksums(const json& j, const std::string& where) {
  require_success(j, where);
  const json& ranks = array(field(j, "checksums", where), "checksums", where);
  if (ranks.empty()) fail(where, "field 'checksums' lists no TP rank");
  std::vector<std::map<std::string, std::string>> out;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const std::string name = fmt::format("checksums[{}]", r);
    object(ranks[r], where, "field '" + name + "'");
    auto& map = out.emplace_back();
    for (const auto& [storage, hash] : ranks[r].items()) map[storage] = string(hash, name + "." + storage, where);
  }
  return out;
}

json pointers_json(const std::vector<std::vector<StoragePointer>>& pointers) {
  json ranks = json::array();
  for (const auto& rank : pointers) {
    json list = json::array();
    for (const auto& p : rank) list.push_back({{"name", p.name}, {"address", p.address}, {"bytes", p.bytes}});
    ranks.push_back(list);
  }
  return {{"ranks", ranks}};
}

std::vector<std::vector<StoragePointer>> parse_pointers(const json& j, const std::string& where) {
  object(j, where, "the response");
  std::vector<std::vector<StoragePointer>> out;
  for (const auto& rank : array(field(j, "ranks", where), "ranks", where)) {
    auto& list = out.emplace_back();
    for (const auto& p : array(rank, "ranks[]", where)) {
      object(p, where, "field 'ranks[][]'");
      StoragePointer sp;
      sp.name = string(field(p, "name", where, "ranks[][]."), "ranks[][].name", where);
      const json& address = field(p, "address", where, "ranks[][].");
      if (!address.is_number_unsigned()) fail(where, "field 'ranks[][].address' must be an unsigned integer");
      sp.address = address.get<uintptr_t>();
      const json& bytes = field(p, "bytes", where, "ranks[][].");
      if (!bytes.is_number_unsigned()) fail(where, "field 'ranks[][].bytes' must be an unsigned integer");
      sp.bytes = bytes.get<uint64_t>();
      list.push_back(std::move(sp));
    }
  }
  return out;
}

json mode_memory_json(const ModeMemory& memory) {
  return {{"canonical_bytes", memory.canonical_bytes},
          {"rank_image_bytes", memory.rank_image_bytes},
          {"staging_bytes", memory.staging_bytes}};
}

ModeMemory parse_mode_memory(const json& j, const std::string& where) {
  object(j, where, "the response");
  auto get = [&](const char* key) {
    const json& v = field(j, key, where);
    if (!v.is_number_unsigned()) fail(where, fmt::format("field '{}' must be an unsigned integer, got {}", key, v.dump()));
    return v.get<uint64_t>();
  };
  return ModeMemory{get("canonical_bytes"), get("rank_image_bytes"), get("staging_bytes")};
}

json error_json(const std::string& message, std::optional<ErrorKind> kind) {
  json j{{"success", false}, {"message", message}};
  if (kind) j["error_kind"] = error_kind_name(*kind);
  return j;
}

}  // namespace wsb::api
