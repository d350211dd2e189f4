// Matrix schema: defaults, ids, filters, and errors naming the cell and the field.
#include <gtest/gtest.h>

#include "harness/matrix.hpp"
#include "models/core/errors.hpp"

namespace wsb {
namespace {

std::string matrix_error(const nlohmann::json& j) {
  try {
    parse_matrix(j, "m.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Format);
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << j.dump();
  return "";
}

TEST(Matrix, DefaultsApplyAndIdsAreDerived) {
  const auto m = parse_matrix(nlohmann::json::parse(R"({"name": "x", "defaults": {"model": "llama-tiny-bf16", "tp": 2, "n": 3},
      "cells": [{"mode": "disk"}, {"mode": "cpu", "n": 1, "id": "custom"}]})"),
                              "m.json");
  ASSERT_EQ(m.cells.size(), 2u);
  EXPECT_EQ(m.cells[0].id, "llama-tiny-bf16/disk/native/tp2");
  EXPECT_EQ(m.cells[0].n, 3);
  EXPECT_EQ(m.cells[1].id, "custom");
  EXPECT_EQ(m.cells[1].n, 1);
  EXPECT_EQ(filter_cells(m.cells, "disk").size(), 1u);
  EXPECT_EQ(filter_cells(m.cells, "").size(), 2u);
}

TEST(Matrix, ErrorsNameCellAndField) {
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "tpp": 2}]})")),
            "m.json: cell 0: unknown field 'tpp'");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "ram"}]})")),
            "m.json: cell 0: field 'mode': unknown mode 'ram' (disk, cpu)");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"id": "c", "model": "a", "mode": "cpu", "tp": "2"}]})")),
            "m.json: cell 0 (c): field 'tp' must be an integer, got \"2\"");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "tp": 1.7}]})")),
            "m.json: cell 0: field 'tp' must be an integer, got 1.7");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "seed": -1}]})")),
            "m.json: cell 0: field 'seed' must be >= 0, got -1");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "publish_versions": 999999}]})")),
            "m.json: cell 0: field 'publish_versions' must be 1..100, got 999999");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "density": 0}]})")),
            "m.json: cell 0: field 'density' must be in (0, 1]: a zero density publishes identity deltas");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "n": 0}]})")),
            "m.json: cell 0: field 'n' must be 1..1000, got 0");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "target": 4}]})")),
            "m.json: cell 0: field 'target' must be 1..publish_versions (3), got 4");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu"}, {"model": "a", "mode": "cpu"}]})")),
            "m.json: cell 1: duplicate cell id 'a/cpu/native/tp1'");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": []})")),
            "m.json: field 'cells' must be a non-empty array");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"mode": "cpu"}]})")),
            "m.json: cell 0: field 'model' is required");
}

TEST(Matrix, TheSmokeMatrixLoads) {
  const auto m = load_matrix(std::filesystem::path(WSB_PROFILES_DIR) / ".." / ".." / "matrices" / "smoke.json");
  ASSERT_EQ(m.cells.size(), 8u);  // llama, glm, kimi, gpt-oss tiny presets x disk, cpu
  EXPECT_EQ(m.cells[0].mode, "disk");
  EXPECT_EQ(m.cells[1].mode, "cpu");
  EXPECT_EQ(m.cells[0].tp, 2);
  EXPECT_EQ(m.cells[0].n, 3);
}

TEST(Matrix, CudaEngineFieldsAndScaleKnobs) {
  const auto m = parse_matrix(nlohmann::json::parse(R"({"name": "x", "defaults": {"engine": "embedded-cuda"},
      "cells": [{"model": "glm-4.5-air-fp8", "mode": "cpu", "layers": 2, "experts": 8, "chunk_bytes": 16777216,
                 "copy_streams": 4, "cupti": false},
                {"model": "llama-tiny-bf16", "mode": "disk", "engine": "embedded-cpu"}]})"),
                              "m.json");
  ASSERT_EQ(m.cells.size(), 2u);
  const MatrixCell& cuda = m.cells[0];
  EXPECT_TRUE(cuda.uses_cuda());
  EXPECT_EQ(cuda.chunk_bytes, 16777216u);
  EXPECT_EQ(cuda.copy_streams, 4);
  EXPECT_FALSE(cuda.cupti);
  EXPECT_EQ(cuda.scale().layers, 2);
  EXPECT_EQ(cuda.scale().experts, 8);
  EXPECT_EQ(cuda.to_json()["experts"], 8);
  EXPECT_EQ(cuda.to_json()["copy_streams"], 4);
  EXPECT_FALSE(m.cells[1].uses_cuda());
  EXPECT_FALSE(m.cells[1].scaled());
  EXPECT_FALSE(m.cells[1].to_json().contains("copy_streams"));  // CUDA knobs only where they mean something
}

TEST(Matrix, CudaFieldErrors) {
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "engine": "cuda"}]})")),
            "m.json: cell 0: field 'engine': unknown engine 'cuda'");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "copy_streams": 0}]})")),
            "m.json: cell 0: field 'copy_streams' must be 1..16, got 0");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "chunk_bytes": 4096}]})")),
            "m.json: cell 0: field 'chunk_bytes' must be >= 1 MiB");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "cupti": 1}]})")),
            "m.json: cell 0: field 'cupti' must be true or false, got 1");
  EXPECT_EQ(matrix_error(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "a", "mode": "cpu", "experts": 0}]})")),
            "m.json: cell 0: field 'experts' must be >= 1");
}

TEST(Matrix, TheShippedMatricesLoad) {
  const auto dir = std::filesystem::path(WSB_PROFILES_DIR) / ".." / ".." / "matrices";
  const auto cuda = load_matrix(dir / "smoke-cuda.json");
  ASSERT_EQ(cuda.cells.size(), 8u);
  for (const auto& c : cuda.cells) EXPECT_TRUE(c.uses_cuda()) << c.id;
  const auto h200 = load_matrix(dir / "h200.json");
  ASSERT_EQ(h200.cells.size(), 11u);
  EXPECT_EQ(h200.cells[0].model, "llama-3.1-8b-bf16");
  EXPECT_FALSE(h200.cells[0].scaled());  // full size
  EXPECT_EQ(h200.cells[10].experts, 128);
}

}  // namespace
}  // namespace wsb
