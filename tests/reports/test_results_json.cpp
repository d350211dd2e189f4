// Results schema: JSON round trip, unknown fields kept, errors naming cell / trial / field, file I/O.
#include "reports/results_json.hpp"

#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "reports/results_io.hpp"
#include "results_builders.hpp"

namespace wsb {
namespace {

using nlohmann::json;

// A complete results.json as the harness writes it, with unknown keys at every level.
json full_document() {
  return json::parse(R"({
    "schema_version": 1, "tool": "wsbench", "matrix": "smoke", "future_top": [1, 2],
    "context": {"host": "h1", "cpu_model": "AMD EPYC 9654", "cpu_cores": 16, "memory_bytes": 137438953472,
                "kernel": "6.1.0-fc", "os": "Debian 12", "runtime_detected": "firecracker",
                "build_commit": "0b37f1f", "build_type": "RelWithDebInfo", "date_utc": "2026-11-29T17:14:28Z",
                "gpus": [{"name": "NVIDIA H200", "memory_bytes": 150000000000}], "cuda": "12.4"},
    "cells": [{
      "id": "llama-tiny-bf16/disk/native/tp2", "model": "llama-tiny-bf16", "mode": "disk", "runtime": "native",
      "engine": "embedded-cpu", "tp": 2, "n": 1, "status": "pass", "reason": "", "host": "h1",
      "floors": {"host_memcpy_gbps": 64.0, "disk_read_gbps": 2.0, "h2d_gbps": 55.5, "d2d_gbps": 2100.0},
      "bytes": {"canonical": 16060000000, "rank_image_per_rank": [8030000000, 8030000000],
                "delta_compressed": 123456, "changed_tensors": 686},
      "scale": {"layers": 2},
      "trials": [{
        "index": 0, "status": "pass", "reason": "",
        "times_s": {"prepare": 1.25, "commit": 0.5, "pause": 0.512, "envelope": 2.75, "max_stall": 0.6,
                    "native_load": 3.0},
        "phases": [{"name": "prepare.stage", "seconds": 0.25, "bytes": 1000000, "floor": "disk_read",
                    "nvtx": "prepare/stage"}],
        "checks": [{"name": "probe_during_prepare", "pass": true, "detail": "412 responses at v0", "count": 412}],
        "memory": {"rss_peak_bytes": 123456789, "mem_available_bytes": 99},
        "probe": {"responses": 412, "fingerprint": "ab12"},
        "trace": "trace_0.json"
      }]
    }]
  })");
}

std::string error_of(const json& j) {
  try {
    parse_results(j, "results.json");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ReportsResultsJson, DocumentRoundTripsWithUnknownFieldsKept) {
  const json doc = full_document();
  const Results r = doc.get<Results>();
  EXPECT_EQ(r.context.extra, json({{"cuda", "12.4"}}));
  EXPECT_EQ(r.cells[0].extra, json({{"scale", {{"layers", 2}}}}));
  EXPECT_EQ(r.cells[0].floors->extra, json({{"d2d_gbps", 2100.0}}));
  EXPECT_EQ(r.cells[0].bytes->rank_image_per_rank, (std::vector<uint64_t>{8030000000ULL, 8030000000ULL}));
  EXPECT_EQ(r.cells[0].trials[0].phases[0].extra, json({{"nvtx", "prepare/stage"}}));
  EXPECT_EQ(r.cells[0].trials[0].times_s.at("pause"), 0.512);
  EXPECT_EQ(json(r), doc);
}

TEST(ReportsResultsJson, ObjectRoundTripIsEqual) {
  Results r = testing::two_cell_results();
  r.cells[0].bytes = Bytes{16060000000ULL, {1, 2}, std::nullopt, json::object()};
  r.cells[1].floors->h2d_gbps.reset();
  r.cells[1].trials[0].phases.push_back(Phase{"commit.h2d", 0.1, 5500000000ULL, "h2d", json::object()});
  r.cells[1].trials[0].memory = {{"rss_peak_bytes", 1234}};
  r.cells[1].trials[0].refit_streams = {RankStream{0, 5, 524288, json::object()},
                                        RankStream{1, 6, 589824, json({{"transport", "shm"}})}};
  const json written = json(r);
  EXPECT_EQ(written["cells"][1]["trials"][0]["refit_streams"],
            json::parse(R"([{"rank": 0, "buckets": 5, "bytes": 524288},
                            {"rank": 1, "buckets": 6, "bytes": 589824, "transport": "shm"}])"));
  EXPECT_FALSE(written["cells"][0]["trials"][0].contains("refit_streams"));  // none recorded: no key
  const Results back = json::parse(written.dump()).get<Results>();
  EXPECT_EQ(back, r);
}

TEST(ReportsResultsJson, RefitStreamFieldsAreNamed) {
  json doc = full_document();
  doc["cells"][0]["trials"][0]["refit_streams"] = json::parse(R"([{"rank": 0, "buckets": 5, "bytes": 524288},
                                                                  {"rank": 1, "bytes": 589824}])");
  EXPECT_EQ(error_of(doc),
            "cell 'llama-tiny-bf16/disk/native/tp2' trial 0 refit stream of rank 1: missing required field 'buckets'");
  doc["cells"][0]["trials"][0]["refit_streams"] = json::object();
  EXPECT_EQ(error_of(doc),
            "cell 'llama-tiny-bf16/disk/native/tp2' trial 0: field 'refit_streams' must be an array, got object");
}

TEST(ReportsResultsJson, MissingTrialFieldNamesCellTrialAndField) {
  json doc = full_document();
  doc["cells"][0]["trials"][0].erase("times_s");
  EXPECT_EQ(error_of(doc), "cell 'llama-tiny-bf16/disk/native/tp2' trial 0: missing required field 'times_s'");
}

TEST(ReportsResultsJson, MissingCellFieldNamesCellAndField) {
  json doc = full_document();
  doc["cells"][0].erase("model");
  EXPECT_EQ(error_of(doc), "cell 'llama-tiny-bf16/disk/native/tp2': missing required field 'model'");
  doc = full_document();
  doc["cells"][0].erase("id");
  EXPECT_EQ(error_of(doc), "results.json cells[0]: missing required field 'id'");
  doc = full_document();
  doc["cells"][0]["floors"].erase("disk_read_gbps");
  EXPECT_EQ(error_of(doc), "cell 'llama-tiny-bf16/disk/native/tp2' floors: missing required field 'disk_read_gbps'");
  doc = full_document();
  doc["cells"][0]["trials"][0]["phases"][0].erase("seconds");
  EXPECT_EQ(error_of(doc),
            "cell 'llama-tiny-bf16/disk/native/tp2' trial 0 phase 'prepare.stage': missing required field 'seconds'");
}

TEST(ReportsResultsJson, WrongTypesAndValuesAreNamed) {
  json doc = full_document();
  doc["cells"][0]["tp"] = "2";
  EXPECT_EQ(error_of(doc), "cell 'llama-tiny-bf16/disk/native/tp2': field 'tp' must be an integer, got string \"2\"");
  doc = full_document();
  doc["cells"][0]["trials"][0]["times_s"]["pause"] = "fast";
  EXPECT_EQ(error_of(doc),
            "cell 'llama-tiny-bf16/disk/native/tp2' trial 0: field 'times_s.pause' must be a number, got string \"fast\"");
  doc = full_document();
  doc["cells"][0]["status"] = "ok";
  EXPECT_EQ(error_of(doc),
            "cell 'llama-tiny-bf16/disk/native/tp2': field 'status' must be \"pass\", \"fail\" or \"skipped\", got \"ok\"");
  doc = full_document();
  doc["cells"][0]["bytes"]["canonical"] = -1;
  EXPECT_EQ(error_of(doc),
            "cell 'llama-tiny-bf16/disk/native/tp2' bytes: field 'canonical' must be a non-negative integer, got number -1");
}

TEST(ReportsResultsJson, OptionalFieldsDefaultAndCellHostComesFromContext) {
  json doc = full_document();
  json& cell = doc["cells"][0];
  for (const char* k : {"reason", "host", "floors", "bytes"}) cell.erase(k);
  for (const char* k : {"reason", "phases", "checks", "memory", "probe"}) cell["trials"][0].erase(k);
  const Results r = parse_results(doc, "results.json");
  const Cell& c = r.cells[0];
  EXPECT_EQ(c.host, "h1");
  EXPECT_FALSE(c.floors.has_value());
  EXPECT_FALSE(c.bytes.has_value());
  EXPECT_TRUE(c.trials[0].phases.empty());
  EXPECT_EQ(c.trials[0].memory, json::object());
}

TEST(ReportsResultsJson, OtherSchemaVersionIsRejected) {
  json doc = full_document();
  doc["schema_version"] = 2;
  EXPECT_EQ(error_of(doc), "results.json: schema_version 2 is not supported (this wsbench reads 1)");
}

class ReportsResultsFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("wsb_reports_io_" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(ReportsResultsFile, SaveThenLoadGivesTheSameResults) {
  const Results r = testing::two_cell_results();
  save_results(dir_ / "results.json", r);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "results.json.tmp"));
  EXPECT_EQ(load_results(dir_ / "results.json"), r);
}

TEST_F(ReportsResultsFile, LoadErrorsStartWithThePath) {
  json doc = full_document();
  doc["cells"][0]["trials"][0].erase("status");
  const auto path = dir_ / "bad.json";
  std::ofstream(path) << doc.dump();
  try {
    load_results(path);
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), path.string() +
                                         ": cell 'llama-tiny-bf16/disk/native/tp2' trial 0: missing required field 'status'");
  }
  std::ofstream(dir_ / "broken.json") << "{\"schema_version\": 1,";
  EXPECT_THROW(
      {
        try {
          load_results(dir_ / "broken.json");
        } catch (const std::runtime_error& e) {
          EXPECT_EQ(std::string(e.what()).rfind((dir_ / "broken.json").string() + ": not valid JSON", 0), 0u) << e.what();
          throw;
        }
      },
      std::runtime_error);
  EXPECT_THROW(load_results(dir_ / "absent.json"), std::runtime_error);
}

}  // namespace
}  // namespace wsb

namespace wsb {
namespace {

// Results files written by earlier builds (the committed validation reports) still read, with their sync fields in
// the typed record and the same bytes after a round trip.
TEST(ReportsResultsJson, FilesWrittenByEarlierBuildsStillRead) {
  const std::filesystem::path docs = std::filesystem::path(WSBENCH_FIXTURES_DIR) / ".." / ".." / "docs" / "validation";
  const Results refit = load_results(docs / "2026-12-01-refit-cuda-ipc" / "results.json");
  ASSERT_EQ(refit.cells.size(), 3u);
  EXPECT_EQ(refit.cells[0].mode_label(), "refit+cuda-ipc");
  EXPECT_EQ(refit.cells[0].sync.refit.bucket_bytes, 1ull << 30);
  EXPECT_EQ(refit.cells[2].sync, (SyncOptions{SyncModeKind::Refit, {}, {RefitTransport::Inproc, 1ull << 30, 0}}));
  const Results delta = load_results(docs / "2026-12-01-device-delta-commit" / "results.json");
  EXPECT_EQ(delta.cells[1].id, "llama-3.1-8b-bf16/cpu+device-delta/native/tp1");
  EXPECT_EQ(delta.cells[1].sync.cpu.commit_strategy, CommitStrategy::DeviceDelta);
  EXPECT_EQ(delta.cells[2].sync.mode, SyncModeKind::Disk);
  // Every field survives: the file's JSON equals what the typed record writes back.
  std::ifstream in(docs / "2026-12-01-refit-cuda-ipc" / "results.json");
  const json original = json::parse(in);
  EXPECT_EQ(json(refit), original);
}

}  // namespace
}  // namespace wsb
