// CUDA cells are refused before any trial when the machine has no CUDA device.
#include <gtest/gtest.h>

#include "engine/cuda/cuda_ops.hpp"
#include "harness/matrix.hpp"
#include "harness/physics.hpp"
#include "harness/runner.hpp"
#include "core/errors.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb {
namespace {

Matrix one_cuda_cell() {
  Matrix m = parse_matrix(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "llama-tiny-bf16", "mode": "cpu",
      "engine": "embedded-cuda", "tp": 2}]})"),
                          "m.json");
  m.path = "m.json";
  return m;
}

TEST(DevicePreflight, CudaCellWithoutDeviceIsRefusedNamingCellAndNeed) {
  if (cuda_ops::visible_devices() > 0) GTEST_SKIP() << "a CUDA device is present: the refusal path cannot run";
  const Matrix m = one_cuda_cell();
  EXPECT_EQ(test::error_message([&] { check_cells(m, m.cells, WSBENCH_PROFILES_DIR); }, ErrorKind::Resource),
            std::string("m.json: cell 'llama-tiny-bf16/cpu/native/tp2': engine 'embedded-cuda' needs a CUDA device; "
                        "none is visible here (") +
                (cuda_ops::built() ? "driver reports no device" : "this wsbench was built without CUDA") + ")");
}

TEST(DevicePreflight, H2dFloorWithoutDeviceIsAnError) {
  if (cuda_ops::visible_devices() > 0) GTEST_SKIP() << "a CUDA device is present";
  FloorMeasurement floors;
  EXPECT_EQ(test::error_message([&] { add_h2d_floors(floors, 2, 2); }, ErrorKind::Resource),
            "pinned H2D floor: no CUDA device visible (a CUDA cell needs one)");
  EXPECT_EQ(floors.h2d_gbps, 0.0);
}

TEST(DevicePreflight, CudaCellFitsOnTheDevice) {
  if (cuda_ops::visible_devices() == 0) GTEST_SKIP() << "no CUDA device";
  const Matrix m = one_cuda_cell();
  EXPECT_NO_THROW(check_cells(m, m.cells, WSBENCH_PROFILES_DIR));  // a tiny model fits any device
  FloorMeasurement floors;
  add_h2d_floors(floors, 2, 2);
  EXPECT_EQ(floors.h2d.size(), static_cast<size_t>(4 * cuda_ops::visible_devices()));  // 16, 64, 256, 1024 MiB
  // TP 2 on one GPU shares its link; on two or more, ranks 0 and 1 copy over their own links.
  const std::vector<int> expected = cuda_ops::visible_devices() == 1 ? std::vector<int>{0} : std::vector<int>{0, 1};
  EXPECT_EQ(floors.h2d_devices, expected);
  double best0 = 0;
  for (const auto& f : floors.h2d) {
    if (f.device == 0) best0 = std::max(best0, f.gbps);
  }
  EXPECT_GT(best0, 1.0);
  if (expected.size() == 1) {
    EXPECT_EQ(floors.h2d_gbps, best0);
  }
}

}  // namespace
}  // namespace wsb
