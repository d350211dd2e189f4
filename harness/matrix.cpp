#include "harness/matrix.hpp"

#include "engine_api/protocols/protocol.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <type_traits>
#include <regex>
#include <set>
#include <tuple>

#include "core/errors.hpp"
#include "publication/tensor_checksum.hpp"
#include "publisher/publisher.hpp"

namespace wsb {
namespace {

const std::set<std::string> kCellFields{"id",       "model",  "mode",    "runtime",         "engine",
                                        "tp",       "n",      "seed",    "target",          "publish_versions", "updates",
                                        "encoding", "frame_bytes", "checksum_range_bytes", "density", "layers", "experts", "prepare_threads", "floor_bytes",
                                        "chunk_bytes", "copy_streams", "cupti", "commit_strategy",
                                        "delta_staging_bytes", "transport", "bucket_bytes", "base_gpu_id",
                                        "server_command", "server_ready_timeout_s", "server_stop_timeout_s",
                                        "server_request_timeout_s", "store", "protocol", "pause_mode",
                                        "accept_mixed_responses", "checkpoint", "checkpoints"};
const std::set<std::string> kEngines{"embedded-cpu", "embedded-cuda", "http"};
const std::set<std::string> kEncodings{"xor", "overwrite", "auto"};

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

/// A checkpoint path of a matrix: absolute, a relative one taken from `dir` (the matrix file's folder).
std::string checkpoint_path(const nlohmann::json& value, const std::string& key, const std::filesystem::path& dir,
                            const std::string& where) {
  if (!value.is_string() || value.get<std::string>().empty()) {
    fail(where, fmt::format("field '{}' must be a checkpoint directory (a non-empty string), got {}", key, value.dump()));
  }
  std::filesystem::path path = value.get<std::string>();
  if (path.is_relative()) path = dir / path;
  path = std::filesystem::absolute(path).lexically_normal();
  std::string text = path.string();
  if (text.size() > 1 && text.back() == '/') text.pop_back();  // "dir/" and "dir" are one checkpoint
  return text;
}

void apply_checkpoint_fields(MatrixCell& cell, const nlohmann::json& j, const std::filesystem::path& dir,
                             const std::string& where) {
  if (j.contains("checkpoint")) {
    if (j.contains("model")) {
      fail(where, "fields 'model' and 'checkpoint' exclude each other (a checkpoint's config.json is its model)");
    }
    cell.checkpoint = checkpoint_path(j["checkpoint"], "checkpoint", dir, where);
  }
  if (j.contains("checkpoints")) {
    const auto& list = j["checkpoints"];
    if (!list.is_array() || list.empty()) {
      fail(where, "field 'checkpoints' must be a non-empty array of checkpoint directories");
    }
    cell.checkpoints.clear();
    for (const auto& e : list) cell.checkpoints.push_back(checkpoint_path(e, "checkpoints", dir, where));
    // One DELTA per following checkpoint, unless the same object says otherwise (then validation names both).
    if (!j.contains("publish_versions")) cell.publish_versions = static_cast<uint32_t>(cell.checkpoints.size());
  }
  if ((j.contains("checkpoint") || j.contains("checkpoints")) && cell.on_checkpoint()) {
    cell.model = checkpoint_model_id(cell.checkpoint, cell.checkpoints);
  }
}

void apply_fields(MatrixCell& cell, const nlohmann::json& j, const std::string& where,
                  const std::filesystem::path& dir) {
  if (!j.is_object()) fail(where, "must be an object");
  for (const auto& [key, value] : j.items()) {
    if (!kCellFields.contains(key)) fail(where, fmt::format("unknown field '{}'", key));
  }
  if (j.contains("id")) cell.id = get_field<std::string>(j, "id", where);
  if (j.contains("model")) cell.model = get_field<std::string>(j, "model", where);
  apply_checkpoint_fields(cell, j, dir, where);
  read_sync_fields(j, cell.sync, where);
  if (j.contains("runtime")) cell.runtime = get_field<std::string>(j, "runtime", where);
  if (j.contains("engine")) cell.engine = get_field<std::string>(j, "engine", where);
  if (j.contains("tp")) cell.tp = get_field<int>(j, "tp", where);
  if (j.contains("n")) cell.n = get_field<int>(j, "n", where);
  if (j.contains("seed")) cell.seed = get_field<uint64_t>(j, "seed", where);
  if (j.contains("target")) cell.target = get_field<uint32_t>(j, "target", where);
  if (j.contains("publish_versions")) cell.publish_versions = get_field<uint32_t>(j, "publish_versions", where);
  if (j.contains("updates")) cell.updates = get_field<uint32_t>(j, "updates", where);
  if (j.contains("encoding")) cell.encoding = get_field<std::string>(j, "encoding", where);
  if (j.contains("frame_bytes")) cell.frame_bytes = get_field<uint64_t>(j, "frame_bytes", where);
  if (j.contains("checksum_range_bytes")) {
    cell.checksum_range_bytes = get_field<uint64_t>(j, "checksum_range_bytes", where);
  }
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
  if (j.contains("protocol")) cell.protocol = get_field<std::string>(j, "protocol", where);
  if (j.contains("pause_mode")) {
    const auto name = get_field<std::string>(j, "pause_mode", where);
    cell.pause_mode = parse_pause_mode(name);
    if (!cell.pause_mode) {
      fail(where, fmt::format("field 'pause_mode': unknown '{}' (drain, retract, in_place, abort)", name));
    }
  }
  if (j.contains("accept_mixed_responses")) {
    if (!j["accept_mixed_responses"].is_boolean()) {
      fail(where, fmt::format("field 'accept_mixed_responses' must be true or false, got {}",
                              j["accept_mixed_responses"].dump()));
    }
    cell.accept_mixed_responses = j["accept_mixed_responses"].get<bool>();
  }
}

std::string names(const std::map<std::string, Launcher>& launchers) {
  std::vector<std::string> out;
  for (const auto& [name, launcher] : launchers) out.push_back(name);
  return fmt::format("{}", fmt::join(out, ", "));
}

// The checks one field can fail on its own (an axis value is checked by these before any cell is expanded).
void validate_values(const MatrixCell& cell, const std::map<std::string, Launcher>& launchers,
                     const std::string& where) {
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
  if (cell.density && !(*cell.density >= 0 && *cell.density <= 1)) {
    fail(where, fmt::format("field 'density' must be in [0, 1] (0: identity deltas), got {}", *cell.density));
  }
  if (std::string problem = frame_bytes_problem(cell.frame_bytes); !problem.empty()) {
    fail(where, "field 'frame_bytes' " + problem);
  }
  if (std::string problem = checksum_range_bytes_problem(cell.checksum_range_bytes); !problem.empty()) {
    fail(where, "field 'checksum_range_bytes' " + problem);
  }
  if (cell.layers && *cell.layers < 1) fail(where, "field 'layers' must be >= 1");
  if (cell.experts && *cell.experts < 1) fail(where, "field 'experts' must be >= 1");
  if (cell.prepare_threads < 1) fail(where, "field 'prepare_threads' must be >= 1");
  if (cell.floor_bytes < (1u << 20)) fail(where, "field 'floor_bytes' must be >= 1 MiB");
  if (cell.chunk_bytes < (1u << 20)) fail(where, "field 'chunk_bytes' must be >= 1 MiB");
  if (cell.copy_streams < 1 || cell.copy_streams > 16) {
    fail(where, fmt::format("field 'copy_streams' must be 1..16, got {}", cell.copy_streams));
  }
}

// The checks of a cell on real checkpoints.
void validate_checkpoint_fields(const MatrixCell& cell, const std::string& where) {
  if (cell.encoding == "auto" && cell.checkpoints.empty()) {
    fail(where, "field 'encoding': 'auto' needs field 'checkpoints' (synthetic versions are published in one encoding)");
  }
  if (!cell.on_checkpoint()) {
    if (!cell.checkpoints.empty()) fail(where, "field 'checkpoints' needs field 'checkpoint' (the FULL v0 they follow)");
    return;
  }
  if (const std::string id = checkpoint_model_id(cell.checkpoint, cell.checkpoints); cell.model != id) {
    fail(where, fmt::format("field 'model' ('{}') contradicts field 'checkpoint' {} (whose model is '{}')", cell.model,
                            cell.checkpoint, id));
  }
  if (cell.uses_http()) {
    fail(where, "field 'checkpoint' needs an embedded engine (embedded-cpu or embedded-cuda): the servers of engine "
                "'http' take a profile id");
  }
  if (cell.checkpoints.empty()) return;
  if (cell.publish_versions != cell.checkpoints.size()) {
    fail(where, fmt::format("field 'publish_versions' ({}) must equal the number of 'checkpoints' ({}): one DELTA each",
                            cell.publish_versions, cell.checkpoints.size()));
  }
  if (cell.density) fail(where, "field 'density' has no meaning with field 'checkpoints' (the checkpoints are the deltas)");
  if (cell.frame_bytes != 0) {
    fail(where, "field 'frame_bytes' needs synthetic versions (checkpoint publications write one zstd frame per payload)");
  }
  if (cell.checksum_range_bytes != 0) {
    fail(where, "field 'checksum_range_bytes' needs synthetic versions (checkpoint publications write one xxh3-128 "
                "per tensor)");
  }
  if (cell.scaled()) {
    fail(where, "fields 'layers' and 'experts' cannot scale field 'checkpoints' (every tensor of a real delta is "
                "published)");
  }
}

// The checks that relate fields to each other.
void validate_combination(const MatrixCell& cell, const std::string& where) {
  if (cell.target < 1 || cell.target > cell.publish_versions) {
    fail(where, fmt::format("field 'target' must be 1..publish_versions ({}), got {}", cell.publish_versions,
                            cell.target));
  }
  if (cell.updates < 1 || cell.updates > cell.target) {
    fail(where, fmt::format("field 'updates' must be 1..target ({}): each update before the measured one advances "
                            "one version, got {}",
                            cell.target, cell.updates));
  }
  cell.sync.validate(where);
  if (cell.sync.refit.transport == RefitTransport::CudaIpc && !cell.uses_cuda()) {
    fail(where, fmt::format("transport 'cuda-ipc' needs engine 'embedded-cuda' (device memory to export), not '{}'",
                            cell.engine));
  }
  if (!cell.uses_http() && (!cell.server_command.empty() || !cell.store.empty() || !cell.protocol.empty())) {
    fail(where, fmt::format("fields 'server_command', 'store' and 'protocol' need engine 'http', not '{}'",
                            cell.engine));
  }
  if (cell.uses_http()) {
    std::unique_ptr<Protocol> protocol;
    try {
      protocol = make_protocol(cell.effective_protocol());
    } catch (const Error& e) {
      fail(where, e.what());  // names the known protocols
    }
    const PauseMode pause = cell.pause_mode.value_or(protocol->default_pause_mode());
    if (const std::string why = protocol_support(*protocol, cell.sync.mode, pause); !why.empty()) fail(where, why);
  }
  if (cell.accept_mixed_responses && cell.pause_mode != PauseMode::InPlace) {
    fail(where, "field 'accept_mixed_responses' needs pause_mode 'in_place' (no other pause mode mixes versions)");
  }
  validate_checkpoint_fields(cell, where);
}

void validate(const MatrixCell& cell, const std::map<std::string, Launcher>& launchers, const std::string& where) {
  if (cell.model.empty()) fail(where, "field 'model' is required");
  validate_values(cell, launchers, where);
  validate_combination(cell, where);
}

// Fields a default id already names (the mode label carries the commit strategy and the transport): an axis over
// one of them needs no id suffix.
const std::set<std::string> kIdFields{"model",   "mode", "commit_strategy", "transport", "runtime",
                                      "tp",      "protocol", "pause_mode", "checkpoint"};
// Fields that cannot be axes: ids derive from the axes, and a command line is not one value.
const std::set<std::string> kNotAxes{"id", "server_command"};
const std::set<std::string> kTopLevelFields{"name", "description", "defaults", "cells", "launchers",
                                            "axes", "include", "exclude"};

/// Field -> its values, in field-name order (the order cells are expanded in).
using Axes = std::map<std::string, std::vector<nlohmann::json>>;

// One cell while a matrix is expanded.
struct Expanded {
  MatrixCell cell;                     ///< cell.id: the explicit id, empty for the default one
  std::set<std::string> own;           ///< the fields the cell's own JSON object sets (axes skip them)
  std::vector<std::string> suffixes;   ///< id suffixes: the values of the multi-value axes applied
  std::vector<std::string> axis_values;  ///< "field=value" of every axis applied (for error messages)
  std::string where;                   ///< "<matrix>: cell <i>[ (<id>)]"
};

// A matrix's launchers and expanded, excluded and validated cells (ids not yet written into the cells).
struct Level {
  std::string name;
  std::string description;
  std::map<std::string, Launcher> launchers;
  std::vector<Expanded> cells;
};

std::string value_text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string id_of(const Expanded& e) {
  const MatrixCell& c = e.cell;
  std::string id = c.id.empty() ? fmt::format("{}/{}/{}/tp{}", c.model, c.mode_label(), c.runtime, c.tp) : c.id;
  for (const auto& s : e.suffixes) id += "/" + s;
  return id;
}

std::string where_of(const Expanded& e) {
  if (e.axis_values.empty()) return e.where;
  return fmt::format("{} with {}", e.where, fmt::join(e.axis_values, ", "));
}

nlohmann::json json_of(const Expanded& e) {
  MatrixCell c = e.cell;
  c.id = id_of(e);
  return c.to_json();
}

nlohmann::json read_matrix_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorKind::Missing, fmt::format("{}: cannot open matrix", path.string()));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // also out_of_range: a number beyond double
    fail(path.string(), fmt::format("invalid JSON: {}", e.what()));
  }
}

// One axis's values, each checked as a cell field on its own.
std::vector<nlohmann::json> parse_axis(const std::string& field, const nlohmann::json& values,
                                       const std::map<std::string, Launcher>& launchers, const std::string& where,
                                       const std::filesystem::path& dir) {
  if (!kCellFields.contains(field)) fail(where, fmt::format("unknown field '{}'", field));
  if (kNotAxes.contains(field)) fail(where, fmt::format("field '{}' cannot be an axis", field));
  if (!values.is_array() || values.empty()) {
    fail(where, fmt::format("field '{}' must be a non-empty array of values", field));
  }
  for (const auto& v : values) {
    MatrixCell probe;
    apply_fields(probe, nlohmann::json{{field, v}}, where, dir);
    validate_values(probe, launchers, where);
  }
  return values.get<std::vector<nlohmann::json>>();
}

Axes parse_axes(const nlohmann::json& j, const std::map<std::string, Launcher>& launchers, const std::string& origin,
                const std::filesystem::path& dir) {
  if (!j.contains("axes")) return {};
  if (!j["axes"].is_object()) fail(origin, "field 'axes' must be an object (field -> array of values)");
  Axes axes;
  for (const auto& [field, values] : j["axes"].items()) {
    axes[field] = parse_axis(field, values, launchers, origin + ": axes", dir);
  }
  return axes;
}

Expanded with_axis_value(Expanded e, const std::string& field, const nlohmann::json& value, bool several,
                         const std::string& origin, const std::filesystem::path& dir) {
  apply_fields(e.cell, nlohmann::json{{field, value}}, origin + ": axes", dir);
  if (several && !kIdFields.contains(field)) e.suffixes.push_back(value_text(value));
  e.axis_values.push_back(fmt::format("{}={}", field, value_text(value)));
  return e;
}

// The product of the axes' values over one cell, first field outermost; fields the cell sets itself stay.
std::vector<Expanded> expand(const Expanded& base, const Axes& axes, const std::string& origin,
                             const std::filesystem::path& dir) {
  std::vector<Expanded> out{base};
  for (const auto& [field, values] : axes) {
    if (base.own.contains(field)) continue;
    std::vector<Expanded> next;
    for (const auto& e : out) {
      for (const auto& v : values) next.push_back(with_axis_value(e, field, v, values.size() > 1, origin, dir));
    }
    out = std::move(next);
  }
  return out;
}

bool same_launcher(const Launcher& a, const Launcher& b) {
  return std::tie(a.name, a.command, a.gpu, a.no_gpu_why, a.network, a.no_network_why, a.install) ==
         std::tie(b.name, b.command, b.gpu, b.no_gpu_why, b.network, b.no_network_why, b.install);
}

void merge_launchers(Level& level, const Level& included, const std::string& origin, const std::string& from) {
  for (const auto& [name, launcher] : included.launchers) {
    auto [it, inserted] = level.launchers.emplace(name, launcher);
    if (!inserted && !same_launcher(it->second, launcher)) {
      fail(origin, fmt::format("launcher '{}' is defined differently in {}", name, from));
    }
  }
}

Level parse_level(const nlohmann::json& j, const std::string& origin, const std::filesystem::path& dir,
                  std::vector<std::filesystem::path>& chain);

// The included matrix's cells and launchers, loaded as a matrix of its own.
void include_matrix(Level& level, const nlohmann::json& j, const std::string& origin,
                    const std::filesystem::path& dir, std::vector<std::filesystem::path>& chain) {
  if (!j.contains("include")) return;
  if (!j["include"].is_string()) fail(origin, "field 'include' must be a string (a matrix path relative to this one)");
  const std::string name = j["include"];
  const std::filesystem::path path = dir / name;
  const std::string where = fmt::format("{}: include '{}'", origin, name);
  if (!std::filesystem::is_regular_file(path)) fail(where, fmt::format("no matrix at {}", path.string()));
  const auto canonical = std::filesystem::weakly_canonical(path);
  if (std::find(chain.begin(), chain.end(), canonical) != chain.end()) {
    std::vector<std::string> files;
    for (const auto& p : chain) files.push_back(p.filename().string());
    fail(where, fmt::format("include cycle ({} -> {})", fmt::join(files, " -> "), canonical.filename().string()));
  }
  chain.push_back(canonical);
  const Level included = parse_level(read_matrix_json(path), path.string(), path.parent_path(), chain);
  chain.pop_back();
  merge_launchers(level, included, origin, path.string());
  level.cells = included.cells;
}

// The matrix's own cells with its defaults merged in (not yet expanded). `cells` may be left out beside `include`.
std::vector<Expanded> own_cells(const nlohmann::json& j, const std::string& origin, const std::filesystem::path& dir) {
  const nlohmann::json cells = j.value("cells", nlohmann::json::array());
  if (!cells.is_array() || (cells.empty() && !j.contains("include"))) {
    fail(origin, "field 'cells' must be a non-empty array");
  }
  MatrixCell defaults;
  if (j.contains("defaults")) apply_fields(defaults, j["defaults"], origin + ": defaults", dir);
  defaults.id.clear();
  // SyncOptions defaults to cpu; a matrix must still say which mode each cell measures.
  const auto sets_mode = [&](const char* key) {
    return j.contains(key) && j[key].is_object() && j[key].contains("mode");
  };
  std::vector<Expanded> out;
  for (size_t i = 0; i < cells.size(); ++i) {
    const auto& cj = cells[i];
    Expanded e{defaults, {}, {}, {}, fmt::format("{}: cell {}", origin, i)};
    if (cj.is_object() && cj.contains("id") && cj["id"].is_string()) {
      e.where += fmt::format(" ({})", cj["id"].get<std::string>());
    }
    apply_fields(e.cell, cj, e.where, dir);
    if (!sets_mode("defaults") && !sets_mode("axes") && !cj.contains("mode")) {
      fail(e.where, fmt::format("field 'mode' is required ({})", fmt::join(sync_mode_names(), ", ")));
    }
    for (const auto& [key, value] : cj.items()) e.own.insert(key);
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<nlohmann::json> parse_exclude(const nlohmann::json& j, const std::string& origin) {
  if (!j.contains("exclude")) return {};
  if (!j["exclude"].is_array()) fail(origin, "field 'exclude' must be an array of partial cells");
  std::vector<nlohmann::json> out;
  for (size_t i = 0; i < j["exclude"].size(); ++i) {
    const auto& entry = j["exclude"][i];
    const std::string where = fmt::format("{}: exclude {}", origin, i);
    if (!entry.is_object() || entry.empty()) fail(where, "must be a non-empty object (a partial cell)");
    for (const auto& [key, value] : entry.items()) {
      if (!kCellFields.contains(key)) fail(where, fmt::format("unknown field '{}'", key));
    }
    out.push_back(entry);
  }
  return out;
}

bool matches(const nlohmann::json& cell, const nlohmann::json& entry) {
  for (const auto& [key, value] : entry.items()) {
    if (!cell.contains(key) || cell[key] != value) return false;
  }
  return true;
}

// Drops the cells each entry matches; an entry that drops nothing is refused (it is surely a typo).
void apply_exclude(std::vector<Expanded>& cells, const std::vector<nlohmann::json>& exclude,
                   const std::string& origin) {
  for (size_t i = 0; i < exclude.size(); ++i) {
    const size_t before = cells.size();
    std::erase_if(cells, [&](const Expanded& e) { return matches(json_of(e), exclude[i]); });
    if (cells.size() == before) fail(origin, fmt::format("exclude {} ({}) drops no cell", i, exclude[i].dump()));
  }
}

void validate_cells(const Level& level) {
  std::set<std::string> ids;
  for (const auto& e : level.cells) {
    validate(e.cell, level.launchers, where_of(e));
    if (!ids.insert(id_of(e)).second) fail(where_of(e), fmt::format("duplicate cell id '{}'", id_of(e)));
  }
}

Level parse_level(const nlohmann::json& j, const std::string& origin, const std::filesystem::path& dir,
                  std::vector<std::filesystem::path>& chain) {
  if (!j.is_object()) fail(origin, "a matrix must be a JSON object");
  for (const auto& [key, value] : j.items()) {
    if (!kTopLevelFields.contains(key)) fail(origin, fmt::format("unknown top-level field '{}'", key));
  }
  Level level;
  if (!j.contains("name") || !j["name"].is_string()) fail(origin, "field 'name' (string) is required");
  level.name = j["name"];
  if (j.contains("description")) level.description = get_field<std::string>(j, "description", origin);
  level.launchers = builtin_launchers();
  if (j.contains("launchers")) {
    if (!j["launchers"].is_object()) fail(origin, "field 'launchers' must be an object (name -> command template)");
    for (const auto& [name, value] : j["launchers"].items()) {
      level.launchers[name] = parse_launcher(name, value, origin);
    }
  }
  include_matrix(level, j, origin, dir, chain);
  const Axes axes = parse_axes(j, level.launchers, origin, dir);
  const std::vector<nlohmann::json> exclude = parse_exclude(j, origin);
  std::vector<Expanded> cells = std::move(level.cells);
  for (auto& e : own_cells(j, origin, dir)) cells.push_back(std::move(e));
  level.cells.clear();
  for (const auto& e : cells) {
    for (auto& x : expand(e, axes, origin, dir)) level.cells.push_back(std::move(x));
  }
  apply_exclude(level.cells, exclude, origin);
  validate_cells(level);
  return level;
}

Matrix finish(const Level& level) {
  Matrix m;
  m.name = level.name;
  m.description = level.description;
  m.launchers = level.launchers;
  for (const auto& e : level.cells) {
    m.cells.push_back(e.cell);
    m.cells.back().id = id_of(e);
  }
  return m;
}

}  // namespace

std::string MatrixCell::effective_protocol() const {
  if (!uses_http()) return "";
  return protocol.empty() ? "stitch-staging" : protocol;
}

std::string MatrixCell::mode_label() const { return cell_mode_label(sync, effective_protocol(), pause_mode); }

nlohmann::json MatrixCell::to_json() const {
  nlohmann::json j{{"id", id},         {"model", model},
                   {"runtime", runtime}, {"engine", engine}, {"tp", tp},
                   {"n", n},           {"seed", seed},       {"target", target},
                   {"publish_versions", publish_versions},   {"encoding", encoding},
                   {"prepare_threads", prepare_threads},     {"floor_bytes", floor_bytes}};
  if (updates != 1) j["updates"] = updates;
  if (on_checkpoint()) j["checkpoint"] = checkpoint;
  if (!checkpoints.empty()) j["checkpoints"] = checkpoints;
  if (density) j["density"] = *density;
  if (frame_bytes != 0) j["frame_bytes"] = frame_bytes;
  if (checksum_range_bytes != 0) j["checksum_range_bytes"] = checksum_range_bytes;
  if (layers) j["layers"] = *layers;
  if (experts) j["experts"] = *experts;
  write_sync_fields(sync, j);
  if (uses_http()) {
    if (!server_command.empty()) j["server_command"] = server_command;
    j["server_ready_timeout_s"] = server_ready_timeout_s;
    j["server_stop_timeout_s"] = server_stop_timeout_s;
    j["server_request_timeout_s"] = server_request_timeout_s;
    if (!store.empty()) j["store"] = store;
    j["protocol"] = effective_protocol();
  }
  if (pause_mode) j["pause_mode"] = std::string(name_of(*pause_mode));
  if (accept_mixed_responses) j["accept_mixed_responses"] = true;
  if (uses_cuda()) {
    j["chunk_bytes"] = chunk_bytes;
    j["copy_streams"] = copy_streams;
    j["cupti"] = cupti;
  }
  return j;
}

const Launcher& Matrix::launcher_for(const MatrixCell& cell) const {
  auto it = launchers.find(cell.runtime);
  if (it == launchers.end()) {
    throw Error(ErrorKind::Format, fmt::format("cell {}: unknown runtime '{}' ({})", cell.id, cell.runtime, names(launchers)));
  }
  return it->second;
}

Matrix parse_matrix(const nlohmann::json& j, const std::string& origin, const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> chain;
  return finish(parse_level(j, origin, dir, chain));
}

Matrix load_matrix(const std::filesystem::path& path) {
  std::vector<std::filesystem::path> chain{std::filesystem::weakly_canonical(path)};
  Matrix m = finish(parse_level(read_matrix_json(path), path.string(), path.parent_path(), chain));
  m.path = path;
  return m;
}

namespace {

std::string folder_name(const std::filesystem::path& dir) {
  std::filesystem::path p = dir.lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "dir/" normalizes to a trailing empty name
  return p.filename().string();
}

}  // namespace

std::string checkpoint_model_id(const std::filesystem::path& dir, const std::vector<std::string>& following) {
  std::string id = "hf:" + folder_name(dir);
  if (!following.empty()) id += ".." + folder_name(following.back());
  return id;
}

ModelProfile cell_profile(const MatrixCell& cell, const std::filesystem::path& profiles_dir) {
  ModelProfile profile = cell.on_checkpoint() ? profile_from_hf_dir(cell.checkpoint)
                                              : find_profile(cell.model, profiles_dir);
  if (cell.scaled()) profile = scale_profile(profile, cell.scale());
  return profile;
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
