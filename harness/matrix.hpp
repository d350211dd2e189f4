#pragma once
// Matrices (matrices/*.json): cells model x mode x runtime x engine x tp x n, validated on load.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace wsb {

/// One cell of a matrix, defaults applied.
struct MatrixCell {
  std::string id;            ///< "<model>/<mode>/<runtime>/tp<N>" unless given
  std::string model;         ///< profile id
  std::string mode;          ///< "disk" | "cpu"
  std::string runtime = "native";
  std::string engine = "embedded-cpu";
  int tp = 1;
  int n = 1;                 ///< trials (fresh engines)
  uint64_t seed = 0;
  uint32_t target = 1;       ///< version each trial updates to from v0
  uint32_t publish_versions = 3;  ///< publications v0..N
  std::string encoding = "xor";
  std::optional<double> density;
  std::optional<int> layers;  ///< scaling knob
  int prepare_threads = 2;
  uint64_t floor_bytes = 64ull << 20;  ///< buffer size of the floor measurements

  nlohmann::json to_json() const;
};

struct Matrix {
  std::string name;
  std::string description;
  std::filesystem::path path;
  std::vector<MatrixCell> cells;
};

/// Loads and validates. Throws Error(Format) naming the file, the cell (index and id) and the field: unknown
/// field, wrong type, unknown mode/runtime/engine/encoding, tp/n/target out of range, duplicate ids.
Matrix load_matrix(const std::filesystem::path& path);
Matrix parse_matrix(const nlohmann::json& j, const std::string& origin);
/// Cells whose id matches the ECMAScript regex `filter`.
std::vector<MatrixCell> filter_cells(const std::vector<MatrixCell>& cells, const std::string& filter);

}  // namespace wsb
