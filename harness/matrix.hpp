#pragma once
// Matrices (matrices/*.json): cells model x mode x runtime x engine x tp x n, expanded from axes and included
// matrices, validated on load.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/sync_options.hpp"
#include "engine_api/launcher.hpp"
#include "models/profile/profile.hpp"

namespace wsb {

/// One cell of a matrix, defaults applied.
struct MatrixCell {
  std::string id;            ///< "<model>/<mode>/<runtime>/tp<N>" unless given
  std::string model;         ///< profile id; with `checkpoint`, checkpoint_model_id(checkpoint, checkpoints)
  /// A real checkpoint the cell runs on instead of a synthetic model: a FULL v0 in Hugging Face layout whose profile
  /// is profile_from_hf_dir's. Absolute (a relative path in a matrix resolves against that matrix file's folder);
  /// empty: the synthetic model `model`.
  std::string checkpoint;
  /// With `checkpoint`: the real checkpoints that follow it, published as DELTA v1..vN from consecutive pairs
  /// (publish_from_checkpoints; publish_versions = N), absolute as `checkpoint`. Empty: versions 1.. perturb the
  /// checkpoint's weights as the synthetic publisher perturbs its own.
  std::vector<std::string> checkpoints;
  /// Sync mode and its settings: fields mode, commit_strategy, delta_staging_bytes (cpu), transport, bucket_bytes,
  /// base_gpu_id (refit) (core/sync_options.hpp).
  SyncOptions sync{};
  std::string runtime = "native";  ///< launcher name: native | gvisor | one of the matrix's `launchers`
  /// "embedded-cpu" (host storages) | "embedded-cuda" (device storages) | "http" (a server per boot, driven over
  /// the HTTP engine API: `wsbench serve` by default, or `server_command`, e.g. an SGLang-fork launch line)
  std::string engine = "embedded-cpu";
  int tp = 1;
  int n = 1;                 ///< trials (fresh engines)
  uint64_t seed = 0;
  uint32_t target = 1;       ///< version each trial updates to from v0
  /// Updates per trial on the same engine: the first updates - 1 go to versions 1, 2, ... one at a time (the
  /// steady state of an engine that updates again and again: a disk-mode checkpoint already materialized, the
  /// trainer and images warm), and the last, from updates - 1 to `target`, is the one measured and checked.
  /// 1..target; 1 measures the first update of a fresh engine.
  uint32_t updates = 1;
  uint32_t publish_versions = 3;  ///< publications v0..N
  std::string encoding = "xor";  ///< xor | overwrite | auto (cells with `checkpoints`: the smaller per publication)
  /// xor mask bytes per zstd frame of the published deltas; 0 (default) one frame per payload, the
  /// Stitch/SGLang-fork format ("zstd"); > 0 publishes "zstd-frames", which a reader can decode on several threads
  /// per tensor but a fork reader refuses (publication/delta_codec.hpp).
  uint64_t frame_bytes = 0;
  /// Bytes per checksum range of the published deltas; 0 (default) one xxh3-128 per tensor, the fork's
  /// "xxh3-128"; > 0 publishes "xxh3-128-ranges", verified range by range on several threads per tensor but refused
  /// by a fork reader (publication/tensor_checksum.hpp).
  uint64_t checksum_range_bytes = 0;
  std::optional<double> density;
  std::optional<int> layers;   ///< scaling knob: keep the first N layers
  std::optional<int> experts;  ///< scaling knob: keep the first N routed experts (per-tensor shapes stay real)

  /// True for a cell on a real checkpoint.
  bool on_checkpoint() const { return !checkpoint.empty(); }
  /// The profile scale these knobs ask for.
  ProfileScale scale() const { return ProfileScale{layers, experts}; }
  bool scaled() const { return layers.has_value() || experts.has_value(); }
  int prepare_threads = 2;
  /// The mode as ids, tables and comparisons name it (core/sync_options.hpp cell_mode_label: the sync label,
  /// "@protocol" for http, ":pause_mode" when named).
  std::string mode_label() const;
  /// What requests in flight see during a commit (core/pause_mode.hpp); nullopt: the protocol's default (http), the
  /// engine's retract (embedded).
  std::optional<PauseMode> pause_mode;
  /// A response whose tokens span two weight versions (an in_place pause) passes the probe check instead of
  /// failing it; its fingerprint is then not judged.
  bool accept_mixed_responses = false;
  uint64_t floor_bytes = 64ull << 20;  ///< buffer size of the floor measurements
  // embedded-cuda only:
  uint64_t chunk_bytes = 64ull << 20;  ///< H2D copy chunk of commits (bytes)
  int copy_streams = 2;                ///< H2D copy streams per TP rank
  bool cupti = true;                   ///< CUPTI activity summary of every commit (off under nsys: one subscriber)

  // http only:
  /// The weight-update API the server speaks (engine_api/protocols/protocol.hpp); empty: "stitch-staging".
  std::string protocol;
  /// protocol, or "stitch-staging" for an http cell that names none; empty for embedded engines.
  std::string effective_protocol() const;
  /// Server command template (engine_api/engine_client.hpp HttpServerSpec for the placeholders); empty: wsbench serve.
  std::vector<std::string> server_command;
  double server_ready_timeout_s = 60;   ///< start -> GET /health answers 200
  double server_stop_timeout_s = 5;     ///< SIGTERM -> exit, then SIGKILL
  double server_request_timeout_s = 300;  ///< one request (prepare, commit) before it counts as hung
  /// Store the harness publishes into and the servers read ({store}); empty: <workdir>/store. Must be absent or
  /// empty; removed with the workdir unless kept.
  std::string store;

  /// True for engines driven over HTTP.
  bool uses_http() const { return engine == "http"; }
  /// True for engines whose storages live in CUDA device memory.
  bool uses_cuda() const { return engine == "embedded-cuda"; }

  nlohmann::json to_json() const;
};

struct Matrix {
  std::string name;
  std::string description;
  std::filesystem::path path;
  std::vector<MatrixCell> cells;
  std::map<std::string, Launcher> launchers;  ///< the built-in ones plus the matrix's `launchers`

  /// The launcher of `cell.runtime` (validated at load). Throws Error(Format) naming the cell for an unknown one.
  const Launcher& launcher_for(const MatrixCell& cell) const;
};

/// Loads and validates. Cells are expanded in order: the `include`d matrix's cells (loaded as a matrix of its own,
/// from a path relative to this file's folder), then this matrix's own cells with its `defaults` merged in; each is
/// expanded into the product of this matrix's `axes` (field -> non-empty array of values, first field name
/// outermost), skipping the axes whose field the cell's own JSON object sets; `exclude` (array of partial cells)
/// then drops every cell whose to_json() has all of an entry's fields equal. A default id is
/// "<model>/<mode>/<runtime>/tp<N>"; each axis with several values whose field that id does not name appends
/// "/<value>" to the id (default or explicit).
/// Throws Error(Format) naming the file, the cell (index, id, axis values) and the field: unknown field, wrong type,
/// unknown mode/runtime/engine/encoding, tp/n/target out of range, duplicate ids, a malformed launcher
/// (parse_launcher); an axis that is not a cell field, is `id` or `server_command`, has no values or a bad value;
/// a missing included file, an include cycle, a launcher defined differently in the included matrix; an exclude
/// entry with an unknown field or that drops no cell. Error(Missing) when `path` cannot be opened.
Matrix load_matrix(const std::filesystem::path& path);
/// load_matrix on parsed JSON: `origin` names it in errors, `include` is resolved against `dir`.
Matrix parse_matrix(const nlohmann::json& j, const std::string& origin, const std::filesystem::path& dir = {});
/// The profile a cell runs: profile_from_hf_dir(cell.checkpoint) for a cell on a checkpoint, else
/// find_profile(cell.model, profiles_dir); scaled by the cell's knobs. Throws their errors.
ModelProfile cell_profile(const MatrixCell& cell, const std::filesystem::path& profiles_dir);
/// The model a cell on checkpoint `dir` is named and grouped by (ids, tables, comparisons): "hf:<folder name>", as
/// profile_from_hf_dir names the profile; with following checkpoints (real deltas), "hf:<folder name>..<last one's
/// folder name>", so a cell measuring real deltas is never mixed up with one perturbing the same weights.
std::string checkpoint_model_id(const std::filesystem::path& dir, const std::vector<std::string>& following = {});
/// Cells whose id matches the ECMAScript regex `filter`.
std::vector<MatrixCell> filter_cells(const std::vector<MatrixCell>& cells, const std::string& filter);

}  // namespace wsb
