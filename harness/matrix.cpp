#include "harness/matrix.hpp"

#include <fmt/format.h>

#include <fstream>
#include <limits>
#include <type_traits>
#include <regex>
#include <set>

#include "core/errors.hpp"

namespace wsb {
namespace {

const std::set<std::string> kCellFields{"id",       "model",  "mode",    "runtime",         "engine",
                                        "tp",       "n",      "seed",    "target",          "publish_versions",
                                        "encoding", "density", "layers", "experts", "prepare_threads", "floor_bytes",
                                        "chunk_bytes", "copy_streams", "cupti", "commit_strategy",
                                        "delta_staging_bytes", "transport", "bucket_bytes", "base_gpu_id",
                                        "server_command", "server_ready_timeout_s", "server_stop_timeout_s",
                                        "server_request_timeout_s", "store"};
const std::set<std::string> kEngines{"embedded-cpu", "embedded-cuda", "http"};
const std::set<std::string> kEncodings{"xor", "overwrite"};

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw Error(ErrorKind::Format, fmt::format("{}: {}", where, what));
}

template <typename T>
T get_field(const nlohmann::json& j, const std::string& key, const std::string& where) {
  const auto& v = j.at(key);
  // Integers must be JSON integers in range: 1.7 is not a TP size and -1 is not a seed.
  if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) fail(where, fmt::format("field '{}' must be an integer, got {}", key, v.dump()));
    if constexpr (std::is_unsigned_v<T>) {
      if (!v.is_number_unsigned()) fail(where, fmt::format("field '{}' must be >= 0, got {}", key, v.dump()));
      if (v.get<uint64_t>() > std::numeric_limits<T>::max()) fail(where, fmt::format("field '{}' is too large", key));
    } else {
      const int64_t x = v.get<int64_t>();
      if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) {
        fail(where, fmt::format("field '{}' is out of range: {}", key, x));
      }
    }
  }
  try {
    return v.get<T>();
  } catch (const nlohmann::json::exception&) {
    fail(where, fmt::format("field '{}' has the wrong type ({})", key, v.type_name()));
  }
}

void apply_fields(MatrixCell& cell, const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) fail(where, "must be an object");
  for (const auto& [key, value] : j.items()) {
    if (!kCellFields.contains(key)) fail(where, fmt::format("unknown field '{}'", key));
  }
  if (j.contains("id")) cell.id = get_field<std::string>(j, "id", where);
  if (j.contains("model")) cell.model = get_field<std::string>(j, "model", where);
  read_sync_fields(j, cell.sync, where);
  if (j.contains("runtime")) cell.runtime = get_field<std::string>(j, "runtime", where);
  if (j.contains("engine")) cell.engine = get_field<std::string>(j, "engine", where);
  if (j.contains("tp")) cell.tp = get_field<int>(j, "tp", where);
  if (j.contains("n")) cell.n = get_field<int>(j, "n", where);
  if (j.contains("seed")) cell.seed = get_field<uint64_t>(j, "seed", where);
  if (j.contains("target")) cell.target = get_field<uint32_t>(j, "target", where);
  if (j.contains("publish_versions")) cell.publish_versions = get_field<uint32_t>(j, "publish_versions", where);
  if (j.contains("encoding")) cell.encoding = get_field<std::string>(j, "encoding", where);
  if (j.contains("density")) cell.density = get_field<double>(j, "density", where);
  if (j.contains("layers")) cell.layers = get_field<int>(j, "layers", where);
  if (j.contains("experts")) cell.experts = get_field<int>(j, "experts", where);
  if (j.contains("prepare_threads")) cell.prepare_threads = get_field<int>(j, "prepare_threads", where);
  if (j.contains("floor_bytes")) cell.floor_bytes = get_field<uint64_t>(j, "floor_bytes", where);
  if (j.contains("chunk_bytes")) cell.chunk_bytes = get_field<uint64_t>(j, "chunk_bytes", where);
  if (j.contains("copy_streams")) cell.copy_streams = get_field<int>(j, "copy_streams", where);
  if (j.contains("cupti")) {
    if (!j["cupti"].is_boolean()) fail(where, fmt::format("field 'cupti' must be true or false, got {}", j["cupti"].dump()));
    cell.cupti = j["cupti"].get<bool>();
  }
  if (j.contains("server_command")) {
    const auto& c = j["server_command"];
    if (!c.is_array() || c.empty()) fail(where, "field 'server_command' must be a non-empty array of strings");
    cell.server_command.clear();
    for (const auto& e : c) {
      if (!e.is_string()) fail(where, fmt::format("field 'server_command' elements must be strings, got {}", e.dump()));
      cell.server_command.push_back(e.get<std::string>());
    }
    if (cell.server_command.front().empty()) fail(where, "field 'server_command': the program is empty");
  }
  for (auto [key, value] : {std::pair{"server_ready_timeout_s", &cell.server_ready_timeout_s},
                            std::pair{"server_stop_timeout_s", &cell.server_stop_timeout_s},
                            std::pair{"server_request_timeout_s", &cell.server_request_timeout_s}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_number() || j[key].get<double>() <= 0) {
      fail(where, fmt::format("field '{}' must be a number of seconds > 0, got {}", key, j[key].dump()));
    }
    *value = j[key].get<double>();
  }
  if (j.contains("store")) cell.store = get_field<std::string>(j, "store", where);
}

std::string names(const std::map<std::string, Launcher>& launchers) {
  std::vector<std::string> out;
  for (const auto& [name, launcher] : launchers) out.push_back(name);
  return fmt::format("{}", fmt::join(out, ", "));
}

void validate(const MatrixCell& cell, const std::map<std::string, Launcher>& launchers, const std::string& where) {
  if (cell.model.empty()) fail(where, "field 'model' is required");
  if (!launchers.contains(cell.runtime)) {
    fail(where, fmt::format("field 'runtime': unknown runtime '{}' ({})", cell.runtime, names(launchers)));
  }
  if (!kEngines.contains(cell.engine)) fail(where, fmt::format("field 'engine': unknown engine '{}'", cell.engine));
  if (!kEncodings.contains(cell.encoding)) fail(where, fmt::format("field 'encoding': unknown '{}'", cell.encoding));
  if (cell.tp < 1 || cell.tp > 64) fail(where, fmt::format("field 'tp' must be 1..64, got {}", cell.tp));
  if (cell.n < 1 || cell.n > 1000) fail(where, fmt::format("field 'n' must be 1..1000, got {}", cell.n));
  if (cell.publish_versions < 1 || cell.publish_versions > 100) {
    fail(where, fmt::format("field 'publish_versions' must be 1..100, got {}", cell.publish_versions));
  }
  if (cell.target < 1 || cell.target > cell.publish_versions) {
    fail(where, fmt::format("field 'target' must be 1..publish_versions ({}), got {}", cell.publish_versions,
                            cell.target));
  }
  if (cell.density && (*cell.density <= 0 || *cell.density > 1)) {
    fail(where, "field 'density' must be in (0, 1]: a zero density publishes identity deltas");
  }
  if (cell.layers && *cell.layers < 1) fail(where, "field 'layers' must be >= 1");
  if (cell.experts && *cell.experts < 1) fail(where, "field 'experts' must be >= 1");
  if (cell.prepare_threads < 1) fail(where, "field 'prepare_threads' must be >= 1");
  if (cell.floor_bytes < (1u << 20)) fail(where, "field 'floor_bytes' must be >= 1 MiB");
  if (cell.chunk_bytes < (1u << 20)) fail(where, "field 'chunk_bytes' must be >= 1 MiB");
  if (cell.copy_streams < 1 || cell.copy_streams > 16) {
    fail(where, fmt::format("field 'copy_streams' must be 1..16, got {}", cell.copy_streams));
  }
  cell.sync.validate(where);
  if (cell.sync.refit.transport == RefitTransport::CudaIpc && !cell.uses_cuda()) {
    fail(where, fmt::format("transport 'cuda-ipc' needs engine 'embedded-cuda' (device memory to export), not '{}'",
                            cell.engine));
  }
  if (cell.sync.mode == SyncModeKind::Refit && cell.uses_http()) {
    // The trainer simulator streams into the embedded engine's receivers; a served engine has no stream endpoint.
    fail(where, "mode 'refit' needs an embedded engine (embedded-cpu or embedded-cuda), not 'http'");
  }
  if (!cell.uses_http() && (!cell.server_command.empty() || !cell.store.empty())) {
    fail(where, fmt::format("fields 'server_command' and 'store' need engine 'http', not '{}'", cell.engine));
  }
}

}  // namespace

nlohmann::json MatrixCell::to_json() const {
  nlohmann::json j{{"id", id},         {"model", model},
                   {"runtime", runtime}, {"engine", engine}, {"tp", tp},
                   {"n", n},           {"seed", seed},       {"target", target},
                   {"publish_versions", publish_versions},   {"encoding", encoding},
                   {"prepare_threads", prepare_threads},     {"floor_bytes", floor_bytes}};
  if (density) j["density"] = *density;
  if (layers) j["layers"] = *layers;
  if (experts) j["experts"] = *experts;
  write_sync_fields(sync, j);
  if (uses_http()) {
    if (!server_command.empty()) j["server_command"] = server_command;
    j["server_ready_timeout_s"] = server_ready_timeout_s;
    j["server_stop_timeout_s"] = server_stop_timeout_s;
    j["server_request_timeout_s"] = server_request_timeout_s;
    if (!store.empty()) j["store"] = store;
  }
  if (uses_cuda()) {
    j["chunk_bytes"] = chunk_bytes;
    j["copy_streams"] = copy_streams;
    j["cupti"] = cupti;
  }
  return j;
}

Matrix parse_matrix(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) fail(origin, "a matrix must be a JSON object");
  for (const auto& [key, value] : j.items()) {
    if (key != "name" && key != "description" && key != "defaults" && key != "cells" && key != "launchers") {
      fail(origin, fmt::format("unknown top-level field '{}'", key));
    }
  }
  Matrix m;
  if (!j.contains("name") || !j["name"].is_string()) fail(origin, "field 'name' (string) is required");
  m.name = j["name"];
  if (j.contains("description")) m.description = get_field<std::string>(j, "description", origin);
  m.launchers = builtin_launchers();
  if (j.contains("launchers")) {
    if (!j["launchers"].is_object()) fail(origin, "field 'launchers' must be an object (name -> command template)");
    for (const auto& [name, value] : j["launchers"].items()) m.launchers[name] = parse_launcher(name, value, origin);
  }
  MatrixCell defaults;
  if (j.contains("defaults")) apply_fields(defaults, j["defaults"], origin + ": defaults");
  if (!j.contains("cells") || !j["cells"].is_array() || j["cells"].empty()) {
    fail(origin, "field 'cells' must be a non-empty array");
  }
  std::set<std::string> ids;
  for (size_t i = 0; i < j["cells"].size(); ++i) {
    const auto& cj = j["cells"][i];
    std::string where = fmt::format("{}: cell {}", origin, i);
    if (cj.is_object() && cj.contains("id") && cj["id"].is_string()) where += fmt::format(" ({})", cj["id"].get<std::string>());
    MatrixCell cell = defaults;
    cell.id.clear();
    apply_fields(cell, cj, where);
    // SyncOptions defaults to cpu; a matrix must still say which mode each cell measures.
    const bool has_mode = (j.contains("defaults") && j["defaults"].is_object() && j["defaults"].contains("mode")) ||
                          cj.contains("mode");
    if (!has_mode) fail(where, fmt::format("field 'mode' is required ({})", fmt::join(sync_mode_names(), ", ")));
    validate(cell, m.launchers, where);
    if (cell.id.empty()) {
      cell.id = fmt::format("{}/{}/{}/tp{}", cell.model, cell.mode_label(), cell.runtime, cell.tp);
    }
    if (!ids.insert(cell.id).second) fail(where, fmt::format("duplicate cell id '{}'", cell.id));
    m.cells.push_back(cell);
  }
  return m;
}

const Launcher& Matrix::launcher_for(const MatrixCell& cell) const {
  auto it = launchers.find(cell.runtime);
  if (it == launchers.end()) {
    throw Error(ErrorKind::Format, fmt::format("cell {}: unknown runtime '{}' ({})", cell.id, cell.runtime, names(launchers)));
  }
  return it->second;
}

Matrix load_matrix(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorKind::Missing, fmt::format("{}: cannot open matrix", path.string()));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // also out_of_range: a number beyond double
    fail(path.string(), fmt::format("invalid JSON: {}", e.what()));
  }
  Matrix m = parse_matrix(j, path.string());
  m.path = path;
  return m;
}

std::vector<MatrixCell> filter_cells(const std::vector<MatrixCell>& cells, const std::string& filter) {
  if (filter.empty()) return cells;
  std::regex re;
  try {
    re = std::regex(filter);
  } catch (const std::regex_error& e) {
    throw Error(ErrorKind::Format, fmt::format("--filter '{}': {}", filter, e.what()));
  }
  std::vector<MatrixCell> out;
  for (const auto& cell : cells) {
    if (std::regex_search(cell.id, re)) out.push_back(cell);
  }
  return out;
}

}  // namespace wsb
