#include "engine_api/wsbench_extras.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace wsb {
namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& endpoint, const std::string& what) {
  throw Error(ErrorKind::Format, fmt::format("{}: {}", endpoint, what));
}

const json& at(const json& j, const std::string& key, const std::string& endpoint, const std::string& path) {
  if (!j.is_object()) fail(endpoint, fmt::format("'{}' is not an object", path.empty() ? "the answer" : path));
  auto it = j.find(key);
  if (it == j.end()) fail(endpoint, fmt::format("field '{}{}' is missing", path.empty() ? "" : path + ".", key));
  return *it;
}

uint64_t unsigned_at(const json& j, const std::string& key, const std::string& endpoint, const std::string& path) {
  const json& v = at(j, key, endpoint, path);
  if (!v.is_number_unsigned()) fail(endpoint, fmt::format("field '{}' must be an unsigned integer, got {}", key, v.dump()));
  return v.get<uint64_t>();
}

double number_at(const json& j, const std::string& key, const std::string& endpoint, const std::string& path) {
  const json& v = at(j, key, endpoint, path);
  if (!v.is_number()) fail(endpoint, fmt::format("field '{}' must be a number, got {}", key, v.dump()));
  return v.get<double>();
}

json timed_json(double seconds, const std::vector<PhaseRecord>& phases) {
  return {{"seconds", seconds}, {"phases", phases_json(phases)}};
}

}  // namespace

json phases_json(const std::vector<PhaseRecord>& phases) {
  json out = json::array();
  for (const auto& p : phases) {
    out.push_back({{"name", p.name}, {"seconds", p.seconds}, {"bytes", p.bytes}, {"floor", floor_name(p.floor)}});
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

json mode_memory_json(const ModeMemory& memory) {
  return {{"canonical_bytes", memory.canonical_bytes},
          {"rank_image_bytes", memory.rank_image_bytes},
          {"staging_bytes", memory.staging_bytes}};
}

json last_update_json(const LastUpdate& last) {
  json out{{"prepare", nullptr}, {"commit", nullptr}};
  if (last.prepare) out["prepare"] = timed_json(last.prepare->seconds, last.prepare->phases);
  if (last.commit) {
    out["commit"] = timed_json(last.commit->seconds, last.commit->phases);
    out["commit"]["pause_seconds"] = last.commit->pause_seconds ? json(*last.commit->pause_seconds) : json(nullptr);
  }
  return out;
}

std::vector<PhaseRecord> wire_phases(const json& j, const std::string& section, const std::string& endpoint) {
  const json* list = nullptr;
  std::string path = "phases";
  if (section == "boot") {
    list = &at(j, "phases", endpoint, "");
  } else {
    const json& s = at(j, section, endpoint, "");
    if (s.is_null()) return {};
    list = &at(s, "phases", endpoint, section);
    path = section + ".phases";
  }
  if (!list->is_array()) fail(endpoint, fmt::format("field '{}' must be an array", path));
  std::vector<PhaseRecord> out;
  for (const auto& p : *list) {
    PhaseRecord r;
    const json& name = at(p, "name", endpoint, path + "[]");
    if (!name.is_string()) fail(endpoint, fmt::format("field '{}[].name' must be a string", path));
    r.name = name.get<std::string>();
    r.seconds = number_at(p, "seconds", endpoint, path + "[]");
    r.bytes = unsigned_at(p, "bytes", endpoint, path + "[]");
    const std::string floor = p.value("floor", std::string("none"));
    for (Floor f : {Floor::None, Floor::HostMemcpy, Floor::DiskRead, Floor::H2D, Floor::DiskReadWrite}) {
      if (floor == floor_name(f)) r.floor = f;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<double> wire_pause_seconds(const json& j, const std::string& endpoint) {
  const json& commit = at(j, "commit", endpoint, "");
  if (commit.is_null()) return std::nullopt;
  const json& pause = at(commit, "pause_seconds", endpoint, "commit");
  if (pause.is_null()) return std::nullopt;
  if (!pause.is_number()) fail(endpoint, "field 'commit.pause_seconds' must be a number or null");
  return pause.get<double>();
}

std::vector<std::vector<StoragePointer>> wire_pointers(const json& j, const std::string& endpoint) {
  const json& ranks = at(j, "ranks", endpoint, "");
  if (!ranks.is_array()) fail(endpoint, "field 'ranks' must be an array");
  std::vector<std::vector<StoragePointer>> out;
  for (const auto& rank : ranks) {
    if (!rank.is_array()) fail(endpoint, "field 'ranks[]' must be an array");
    auto& list = out.emplace_back();
    for (const auto& p : rank) {
      StoragePointer sp;
      const json& name = at(p, "name", endpoint, "ranks[][]");
      if (!name.is_string()) fail(endpoint, "field 'ranks[][].name' must be a string");
      sp.name = name.get<std::string>();
      sp.address = static_cast<uintptr_t>(unsigned_at(p, "address", endpoint, "ranks[][]"));
      sp.bytes = unsigned_at(p, "bytes", endpoint, "ranks[][]");
      list.push_back(std::move(sp));
    }
  }
  return out;
}

ModeMemory wire_mode_memory(const json& j, const std::string& endpoint) {
  return ModeMemory{unsigned_at(j, "canonical_bytes", endpoint, ""), unsigned_at(j, "rank_image_bytes", endpoint, ""),
                    unsigned_at(j, "staging_bytes", endpoint, "")};
}

}  // namespace wsb
