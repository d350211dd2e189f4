// A matrix whose refit bucket is too small for its model is refused before any cell runs (exit 2 in the CLI), naming
// the largest weight, whose size is the bucket that works.
#include <gtest/gtest.h>

#include "core/errors.hpp"
#include "harness/matrix.hpp"
#include "harness/runner.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb {
namespace {

Matrix refit_cell(const std::string& extra) {
  Matrix m = parse_matrix(nlohmann::json::parse(R"({"name": "x", "cells": [{"model": "llama-tiny-bf16", "mode": "cpu",
      "tp": 2}, {"model": "llama-tiny-bf16", "mode": "refit", "tp": 2)" + extra + "}]}"),
                          "m.json");
  m.path = "m.json";
  return m;
}

TEST(RunnerPreflight, RefitBucketSmallerThanTheLargestWeightIsRefusedBeforeAnyCell) {
  const Matrix m = refit_cell(R"(, "bucket_bytes": 4096)");
  EXPECT_EQ(test::error_message([&] { check_cells(m, m.cells, WSBENCH_PROFILES_DIR); }, ErrorKind::Format),
            "m.json: cell 'llama-tiny-bf16/refit+inproc/native/tp2': refit mode: bucket_size_bytes 4096 B is smaller "
            "than weight 'model.embed_tokens.weight' (65536 B on rank 0, the largest weight of any rank); use a "
            "bucket of at least 65536 B");
}

TEST(RunnerPreflight, RefitBucketOfTheLargestWeightPasses) {
  const Matrix m = refit_cell(R"(, "bucket_bytes": 65536)");
  EXPECT_NO_THROW(check_cells(m, m.cells, WSBENCH_PROFILES_DIR));
}

TEST(RunnerPreflight, HttpRefitCellIsNotCheckedForBuckets) {
  // The SGLang tensor protocol sends a tensor larger than the bucket in a bucket of its own.
  const Matrix m = refit_cell(R"(, "bucket_bytes": 4096, "engine": "http", "protocol": "sglang")");
  EXPECT_NO_THROW(check_cells(m, m.cells, WSBENCH_PROFILES_DIR));
}

}  // namespace
}  // namespace wsb
