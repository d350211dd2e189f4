// The sync options record: its one label builder, its name tables, and its JSON fields as matrices and results
// spell them.
#include <gtest/gtest.h>

#include "core/errors.hpp"
#include "core/sync_options.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb {
namespace {

/// The message of the Error(Format) `fn` throws.
std::string error_of(const std::function<void()>& fn) { return test::error_message(fn, ErrorKind::Format); }

TEST(SyncOptions, LabelsAreTheModeNamesWithTheSettingsThatTellConfigurationsApart) {
  SyncOptions o;
  o.mode = SyncModeKind::Disk;
  EXPECT_EQ(o.label(), "disk");
  o.mode = SyncModeKind::Cpu;
  EXPECT_EQ(o.label(), "cpu");
  o.cpu.commit_strategy = CommitStrategy::DeviceDelta;
  EXPECT_EQ(o.label(), "cpu+device-delta");
  o = SyncOptions{SyncModeKind::Refit};
  EXPECT_EQ(o.label(), "refit+inproc");
  o.refit.transport = RefitTransport::Shm;
  EXPECT_EQ(o.label(), "refit+shm");
  o.refit.transport = RefitTransport::CudaIpc;
  EXPECT_EQ(o.label(), "refit+cuda-ipc");
}

TEST(SyncOptions, NamesParseBackToTheirValues) {
  ASSERT_EQ(sync_mode_names(), (std::vector<std::string>{"disk", "cpu", "refit"}));
  ASSERT_EQ(commit_strategy_names(), (std::vector<std::string>{"full", "device-delta"}));
  ASSERT_EQ(refit_transport_names(), (std::vector<std::string>{"inproc", "shm", "cuda-ipc"}));
  for (const auto& n : sync_mode_names()) EXPECT_EQ(name_of(parse_sync_mode(n)), n);
  for (const auto& n : commit_strategy_names()) EXPECT_EQ(name_of(parse_commit_strategy(n)), n);
  for (const auto& n : refit_transport_names()) EXPECT_EQ(name_of(parse_refit_transport(n)), n);
  EXPECT_EQ(error_of([] { parse_sync_mode("ram"); }), "unknown mode 'ram' (disk, cpu, refit)");
  EXPECT_EQ(error_of([] { parse_commit_strategy("sparse"); }), "unknown strategy 'sparse' (full, device-delta)");
  EXPECT_EQ(error_of([] { parse_refit_transport("pigeon"); }), "unknown transport 'pigeon' (inproc, shm, cuda-ipc)");
}

TEST(SyncOptions, FieldsRoundTripThroughJsonWithOnlyTheModesOwnKeys) {
  SyncOptions o{SyncModeKind::Refit};
  o.refit = RefitSyncOptions{RefitTransport::CudaIpc, 1 << 20, 2};
  nlohmann::json j = nlohmann::json::object();
  write_sync_fields(o, j);
  EXPECT_EQ(j, (nlohmann::json{{"mode", "refit"}, {"transport", "cuda-ipc"}, {"bucket_bytes", 1 << 20}, {"base_gpu_id", 2}}));
  SyncOptions back;
  read_sync_fields(j, back);
  EXPECT_EQ(back, o);

  SyncOptions delta;
  delta.cpu = CpuSyncOptions{CommitStrategy::DeviceDelta, 4096};
  j = nlohmann::json::object();
  write_sync_fields(delta, j);
  EXPECT_EQ(j, (nlohmann::json{{"mode", "cpu"}, {"commit_strategy", "device-delta"}, {"delta_staging_bytes", 4096}}));
  SyncOptions delta_back{SyncModeKind::Disk};
  read_sync_fields(j, delta_back);
  EXPECT_EQ(delta_back, delta);

  j = nlohmann::json::object();
  write_sync_fields(SyncOptions{SyncModeKind::Disk}, j);
  EXPECT_EQ(j, (nlohmann::json{{"mode", "disk"}}));
}

TEST(SyncOptions, BadFieldsAreRefusedNamingTheField) {
  SyncOptions o;
  EXPECT_EQ(error_of([&] { read_sync_fields(nlohmann::json{{"mode", 3}}, o, "m.json: cell 0"); }),
            "m.json: cell 0: field 'mode' must be a string, got 3");
  EXPECT_EQ(error_of([&] { read_sync_fields(nlohmann::json{{"transport", "pigeon"}}, o, "c"); }),
            "c: field 'transport': unknown transport 'pigeon' (inproc, shm, cuda-ipc)");
  EXPECT_EQ(error_of([&] { read_sync_fields(nlohmann::json{{"base_gpu_id", -1}}, o, "c"); }),
            "c: field 'base_gpu_id' must be >= 0, got -1");
  EXPECT_EQ(error_of([&] { read_sync_fields(nlohmann::json{{"bucket_bytes", 1.5}}, o, "c"); }),
            "c: field 'bucket_bytes' must be an integer, got 1.5");
  EXPECT_EQ(o, SyncOptions{});  // nothing read from a refused object
}

TEST(SyncOptions, SettingsOfAnotherModeAreRefused) {
  SyncOptions o{SyncModeKind::Disk};
  o.cpu.commit_strategy = CommitStrategy::DeviceDelta;
  EXPECT_EQ(error_of([&] { o.validate("c"); }),
            "c: fields 'commit_strategy' and 'delta_staging_bytes' apply to mode cpu only (mode is 'disk')");
  o = SyncOptions{SyncModeKind::Cpu};
  o.refit.bucket_bytes = 4096;
  EXPECT_EQ(error_of([&] { o.validate("c"); }),
            "c: fields 'transport' and 'bucket_bytes' apply to mode refit only (mode is 'cpu')");
  o = SyncOptions{SyncModeKind::Refit};
  o.refit.base_gpu_id = 1;
  EXPECT_EQ(error_of([&] { o.validate("c"); }),
            "c: field 'base_gpu_id' applies to transport cuda-ipc only (transport is 'inproc')");
  o.refit.transport = RefitTransport::CudaIpc;
  EXPECT_NO_THROW(o.validate("c"));
}

}  // namespace
}  // namespace wsb
