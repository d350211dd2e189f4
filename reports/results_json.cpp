#include "reports/results_json.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "reports/json_fields.hpp"

namespace wsb {
namespace {

using nlohmann::json;

// Extras first so that the typed fields written afterwards win on a name clash.
json start_with(const json& extra) { return extra.is_object() ? extra : json::object(); }

json object_or_empty(const json* v, const FieldReader& r, const char* key) {
  if (v == nullptr) return json::object();
  if (!v->is_object()) {
    throw std::runtime_error(fmt::format("{}: field '{}' must be an object, got {}", r.where(), key, v->type_name()));
  }
  return *v;
}

const json& array_field(const json* v, const FieldReader& r, const char* key) {
  if (v == nullptr) throw std::runtime_error(fmt::format("{}: missing required field '{}'", r.where(), key));
  if (!v->is_array()) {
    throw std::runtime_error(fmt::format("{}: field '{}' must be an array, got {}", r.where(), key, v->type_name()));
  }
  return *v;
}

Floors parse_floors(const json& j, const std::string& where) {
  FieldReader r(j, where);
  Floors v;
  v.host_memcpy_gbps = r.required<double>("host_memcpy_gbps");
  v.disk_read_gbps = r.required<double>("disk_read_gbps");
  v.h2d_gbps = r.optional<double>("h2d_gbps");
  v.extra = r.unknown();
  return v;
}

Bytes parse_bytes(const json& j, const std::string& where) {
  FieldReader r(j, where);
  Bytes v;
  v.canonical = r.required<uint64_t>("canonical");
  v.rank_image_per_rank = r.optional<std::vector<uint64_t>>("rank_image_per_rank").value_or(std::vector<uint64_t>{});
  v.delta_compressed = r.optional<uint64_t>("delta_compressed");
  v.extra = r.unknown();
  return v;
}

Phase parse_phase(const json& j, const std::string& where) {
  FieldReader r(j, where);
  Phase v;
  v.name = r.required<std::string>("name");
  FieldReader named(j, fmt::format("{} '{}'", where, v.name));
  named.raw("name");
  v.seconds = named.required<double>("seconds");
  v.bytes = named.optional<uint64_t>("bytes").value_or(0);
  v.floor = named.optional<std::string>("floor").value_or("");
  v.extra = named.unknown();
  return v;
}

RankStream parse_rank_stream(const json& j, const std::string& where) {
  FieldReader r(j, where);
  RankStream v;
  v.rank = r.required<int64_t>("rank");
  FieldReader named(j, fmt::format("{} of rank {}", where, v.rank));
  named.raw("rank");
  v.buckets = named.required<uint64_t>("buckets");
  v.bytes = named.required<uint64_t>("bytes");
  v.extra = named.unknown();
  return v;
}

Check parse_check(const json& j, const std::string& where) {
  FieldReader r(j, where);
  Check v;
  v.name = r.required<std::string>("name");
  FieldReader named(j, fmt::format("{} '{}'", where, v.name));
  named.raw("name");
  v.pass = named.required<bool>("pass");
  v.detail = named.optional<std::string>("detail").value_or("");
  v.extra = named.unknown();
  return v;
}

}  // namespace

Status parse_status(const std::string& text, const std::string& where) {
  if (text == "pass") return Status::Pass;
  if (text == "fail") return Status::Fail;
  if (text == "skipped") return Status::Skipped;
  throw std::runtime_error(
      fmt::format("{}: field 'status' must be \"pass\", \"fail\" or \"skipped\", got \"{}\"", where, text));
}

Context parse_context(const json& j, const std::string& where) {
  FieldReader r(j, where);
  Context v;
  v.host = r.required<std::string>("host");
  v.cpu_model = r.optional<std::string>("cpu_model").value_or("");
  v.cpu_cores = r.optional<int64_t>("cpu_cores").value_or(0);
  v.memory_bytes = r.optional<uint64_t>("memory_bytes").value_or(0);
  v.kernel = r.optional<std::string>("kernel").value_or("");
  v.os = r.optional<std::string>("os").value_or("");
  v.runtime_detected = r.optional<std::string>("runtime_detected").value_or("");
  v.build_commit = r.optional<std::string>("build_commit").value_or("");
  v.build_type = r.optional<std::string>("build_type").value_or("");
  v.date_utc = r.optional<std::string>("date_utc").value_or("");
  if (const json* g = r.raw("gpus")) {
    if (!g->is_array()) {
      throw std::runtime_error(fmt::format("{}: field 'gpus' must be an array, got {}", where, g->type_name()));
    }
    v.gpus = *g;
  }
  v.extra = r.unknown();
  return v;
}

Trial parse_trial(const json& j, const std::string& where) {
  FieldReader r(j, where + " trial");
  Trial v;
  v.index = r.required<int64_t>("index");
  FieldReader t(j, fmt::format("{} trial {}", where, v.index));
  t.raw("index");
  v.status = parse_status(t.required<std::string>("status"), t.where());
  if (v.status == Status::Skipped) {
    throw std::runtime_error(fmt::format("{}: field 'status' must be \"pass\" or \"fail\" for a trial", t.where()));
  }
  v.reason = t.optional<std::string>("reason").value_or("");
  v.times_s = t.required<std::map<std::string, double>>("times_s");
  if (const json* p = t.raw("phases")) {
    const json& arr = array_field(p, t, "phases");
    for (size_t i = 0; i < arr.size(); ++i) v.phases.push_back(parse_phase(arr[i], t.where() + " phase"));
  }
  if (const json* c = t.raw("checks")) {
    const json& arr = array_field(c, t, "checks");
    for (size_t i = 0; i < arr.size(); ++i) v.checks.push_back(parse_check(arr[i], t.where() + " check"));
  }
  v.memory = object_or_empty(t.raw("memory"), t, "memory");
  v.probe = object_or_empty(t.raw("probe"), t, "probe");
  if (const json* s = t.raw("refit_streams")) {
    const json& arr = array_field(s, t, "refit_streams");
    for (const json& e : arr) v.refit_streams.push_back(parse_rank_stream(e, t.where() + " refit stream"));
  }
  v.extra = t.unknown();
  return v;
}

Cell parse_cell(const json& j, const std::string& where) {
  FieldReader r(j, where);
  Cell v;
  v.id = r.required<std::string>("id");
  FieldReader c(j, fmt::format("cell '{}'", v.id));
  c.raw("id");
  v.model = c.required<std::string>("model");
  // The sync fields are read by their one parser; a cell must name its mode.
  if (c.raw("mode") == nullptr) throw std::runtime_error(fmt::format("{}: missing required field 'mode'", c.where()));
  for (const std::string& key : sync_field_names()) c.raw(key);
  read_sync_fields(j, v.sync, c.where());
  v.runtime = c.required<std::string>("runtime");
  v.engine = c.required<std::string>("engine");
  v.protocol = c.optional<std::string>("protocol").value_or("");
  if (auto pause = c.optional<std::string>("pause_mode")) {
    v.pause_mode = parse_pause_mode(*pause);
    if (!v.pause_mode) throw std::runtime_error(fmt::format("{}: unknown pause_mode '{}'", c.where(), *pause));
  }
  v.tp = c.required<int64_t>("tp");
  v.n = c.required<int64_t>("n");
  v.status = parse_status(c.required<std::string>("status"), c.where());
  v.reason = c.optional<std::string>("reason").value_or("");
  v.host = c.optional<std::string>("host").value_or("");
  if (const json* f = c.raw("floors")) v.floors = parse_floors(*f, c.where() + " floors");
  if (const json* b = c.raw("bytes")) v.bytes = parse_bytes(*b, c.where() + " bytes");
  const json& trials = array_field(c.raw("trials"), c, "trials");
  for (const json& t : trials) v.trials.push_back(parse_trial(t, c.where()));
  v.extra = c.unknown();
  return v;
}

Results parse_results(const json& j, const std::string& where) {
  FieldReader r(j, where);
  Results v;
  v.schema_version = r.required<int64_t>("schema_version");
  if (v.schema_version != kResultsSchemaVersion) {
    throw std::runtime_error(fmt::format("{}: schema_version {} is not supported (this wsbench reads {})", where,
                                         v.schema_version, kResultsSchemaVersion));
  }
  v.tool = r.optional<std::string>("tool").value_or("wsbench");
  const json* ctx = r.raw("context");
  if (ctx == nullptr) throw std::runtime_error(fmt::format("{}: missing required field 'context'", where));
  v.context = parse_context(*ctx, where + " context");
  if (const json* h = r.raw("hosts")) {
    const json& arr = array_field(h, r, "hosts");
    for (size_t i = 0; i < arr.size(); ++i) v.hosts.push_back(parse_context(arr[i], fmt::format("{} hosts[{}]", where, i)));
  }
  v.matrix = r.optional<std::string>("matrix").value_or("");
  const json& cells = array_field(r.raw("cells"), r, "cells");
  for (size_t i = 0; i < cells.size(); ++i) {
    Cell cell = parse_cell(cells[i], fmt::format("{} cells[{}]", where, i));
    if (cell.host.empty()) cell.host = v.context.host;
    v.cells.push_back(std::move(cell));
  }
  v.extra = r.unknown();
  return v;
}

void from_json(const json& j, Context& v) { v = parse_context(j, "context"); }
void from_json(const json& j, Floors& v) { v = parse_floors(j, "floors"); }
void from_json(const json& j, Bytes& v) { v = parse_bytes(j, "bytes"); }
void from_json(const json& j, Phase& v) { v = parse_phase(j, "phase"); }
void from_json(const json& j, Check& v) { v = parse_check(j, "check"); }
void from_json(const json& j, Trial& v) { v = parse_trial(j, "trial"); }
void from_json(const json& j, Cell& v) { v = parse_cell(j, "cell"); }
void from_json(const json& j, Results& v) { v = parse_results(j, "results"); }

void to_json(json& j, const Context& v) {
  j = start_with(v.extra);
  j["host"] = v.host;
  j["cpu_model"] = v.cpu_model;
  j["cpu_cores"] = v.cpu_cores;
  j["memory_bytes"] = v.memory_bytes;
  j["kernel"] = v.kernel;
  j["os"] = v.os;
  j["runtime_detected"] = v.runtime_detected;
  j["build_commit"] = v.build_commit;
  j["build_type"] = v.build_type;
  j["date_utc"] = v.date_utc;
  j["gpus"] = v.gpus.is_array() ? v.gpus : json::array();
}

void to_json(json& j, const Floors& v) {
  j = start_with(v.extra);
  j["host_memcpy_gbps"] = v.host_memcpy_gbps;
  j["disk_read_gbps"] = v.disk_read_gbps;
  if (v.h2d_gbps) j["h2d_gbps"] = *v.h2d_gbps;
}

void to_json(json& j, const Bytes& v) {
  j = start_with(v.extra);
  j["canonical"] = v.canonical;
  j["rank_image_per_rank"] = v.rank_image_per_rank;
  if (v.delta_compressed) j["delta_compressed"] = *v.delta_compressed;
}

void to_json(json& j, const Phase& v) {
  j = start_with(v.extra);
  j["name"] = v.name;
  j["seconds"] = v.seconds;
  j["bytes"] = v.bytes;
  j["floor"] = v.floor;
}

void to_json(json& j, const RankStream& v) {
  j = start_with(v.extra);
  j["rank"] = v.rank;
  j["buckets"] = v.buckets;
  j["bytes"] = v.bytes;
}

void to_json(json& j, const Check& v) {
  j = start_with(v.extra);
  j["name"] = v.name;
  j["pass"] = v.pass;
  j["detail"] = v.detail;
}

void to_json(json& j, const Trial& v) {
  j = start_with(v.extra);
  j["index"] = v.index;
  j["status"] = status_name(v.status);
  j["reason"] = v.reason;
  j["times_s"] = v.times_s;
  j["phases"] = v.phases;
  j["checks"] = v.checks;
  j["memory"] = v.memory.is_object() ? v.memory : json::object();
  j["probe"] = v.probe.is_object() ? v.probe : json::object();
  if (!v.refit_streams.empty()) j["refit_streams"] = v.refit_streams;
}

void to_json(json& j, const Cell& v) {
  j = start_with(v.extra);
  j["id"] = v.id;
  j["model"] = v.model;
  write_sync_fields(v.sync, j);
  j["runtime"] = v.runtime;
  j["engine"] = v.engine;
  if (!v.protocol.empty()) j["protocol"] = v.protocol;
  if (v.pause_mode) j["pause_mode"] = std::string(name_of(*v.pause_mode));
  j["tp"] = v.tp;
  j["n"] = v.n;
  j["status"] = status_name(v.status);
  j["reason"] = v.reason;
  j["host"] = v.host;
  if (v.floors) j["floors"] = *v.floors;
  if (v.bytes) j["bytes"] = *v.bytes;
  j["trials"] = v.trials;
}

void to_json(json& j, const Results& v) {
  j = start_with(v.extra);
  j["schema_version"] = v.schema_version;
  j["tool"] = v.tool;
  j["context"] = v.context;
  if (!v.hosts.empty()) j["hosts"] = v.hosts;
  j["matrix"] = v.matrix;
  j["cells"] = v.cells;
}

}  // namespace wsb
