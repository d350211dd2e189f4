// StorageLoader (modes/sync): a storage loaded with its pieces spread over threads is byte for byte what
// load_storage writes, for every storage of the tiny presets at TP 1, 2 and 4 and any thread count; load_mapped
// copies out of a mapped file exactly and leaves the source pages out of the resident set; a wrong output size or
// a canonical tensor of the wrong size is refused with the storage and tensor named.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>
#include <vector>

#include "models/checkpoint/safetensors.hpp"
#include "models/layout/fragment_runs.hpp"
#include "models/profile/profile.hpp"
#include "modes/sync/storage_loader.hpp"
#include "tests/models/checkpoint_test_util.hpp"
#include "tests/models/layout_test_util.hpp"
#include "tests/support/mapped_rss.hpp"
#include "tests/support/error_checks.hpp"
#include "tests/support/param_names.hpp"

namespace wsb {
namespace {

const std::filesystem::path kProfiles = WSBENCH_PROFILES_DIR;

class StorageLoaderTiny : public ::testing::TestWithParam<std::string> {};

TEST_P(StorageLoaderTiny, LoadsEveryStorageExactlyAsLoadStorageOnSeveralThreads) {
  const ModelProfile profile = find_profile(GetParam(), kProfiles);
  const auto canonical = test::layout_canonical(profile);
  const CanonicalLookup lookup = [&](const std::string& name) { return std::span<const uint8_t>(canonical.at(name)); };
  for (int threads : {1, 3}) {
    StorageLoader loader(threads, 1024);  // small pieces: the tiny storages split as the real ones do at 4 MiB
    for (int tp : {1, 2, 4}) {
      for (const RankLayout& layout : build_rank_layouts(profile, tp)) {
        for (const RuntimeStorageSpec& spec : layout.storages) {
          std::vector<uint8_t> whole(spec.bytes(), 0xAB), loaded(spec.bytes(), 0xCD);
          // The tiny presets' bytes are not valid for every transform (kimi's fused w13 needs equal scales): such
          // a storage must fail with load_storage's message.
          const std::string whole_error = test::error_text([&] { load_storage(spec, lookup, whole); });
          const std::string loaded_error = test::error_text([&] { loader.load(spec, lookup, loaded); });
          EXPECT_EQ(loaded_error, whole_error) << spec.name;
          if (whole_error.empty()) {
            EXPECT_EQ(loaded, whole) << spec.name << " tp " << tp << " threads " << threads;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, StorageLoaderTiny,
                         ::testing::Values(std::string("llama-tiny-bf16"), std::string("glm-tiny-fp8"),
                                           std::string("kimi-tiny-nvfp4"), std::string("gpt-oss-tiny-mxfp4")),
                         test::StringParamName());

/// The canonical tensors of `profile` written to one safetensors file and mapped, as a checkpoint's are.
struct MappedCanonical {
  std::map<std::string, std::vector<uint8_t>> bytes;
  std::filesystem::path path;
  std::unique_ptr<SafetensorsFile> file;
  explicit MappedCanonical(const ModelProfile& profile, const std::filesystem::path& dir)
      : bytes(test::layout_canonical(profile)), path(dir / "model.safetensors") {
    std::filesystem::create_directories(dir);
    std::vector<TensorData> tensors;
    for (const TensorSpec& spec : profile.canonical_tensors()) tensors.push_back({spec, bytes.at(spec.name)});
    write_safetensors(path, tensors);
    file = std::make_unique<SafetensorsFile>(path);
  }
  CanonicalLookup lookup() const {
    return [this](const std::string& name) { return file->data(file->at(name)); };
  }
};

TEST(StorageLoaderMapped, CopiesOutOfTheMappingExactlyAsLoadStorage) {
  testutil::TempDir dir;
  for (const char* id : {"llama-tiny-bf16", "glm-tiny-fp8", "gpt-oss-tiny-mxfp4"}) {
    const ModelProfile profile = find_profile(id, kProfiles);
    const MappedCanonical canonical(profile, dir.path() / id);
    const CanonicalLookup lookup = canonical.lookup();
    // Parts of 4 KiB: every plain-gather storage of the tiny presets takes the mapped path, in several parts.
    StorageLoader loader(3, 1024, 4096);
    int mapped = 0;
    for (int tp : {1, 2}) {
      for (const RankLayout& layout : build_rank_layouts(profile, tp)) {
        for (const RuntimeStorageSpec& spec : layout.storages) {
          std::vector<uint8_t> whole(spec.bytes(), 0xAB), loaded(spec.bytes(), 0xCD);
          load_storage(spec, lookup, whole);
          loader.load_mapped(spec, lookup, loaded);
          EXPECT_EQ(loaded, whole) << id << " " << spec.name << " tp " << tp;
          const auto runs = fragment_runs(spec);
          if (!runs.empty() && runs[0].outer == 1 && spec.bytes() >= 4096) ++mapped;
        }
      }
    }
    EXPECT_GT(mapped, 0) << id << ": no storage took the mapped path";
  }
}

TEST(StorageLoaderMapped, LeavesTheStoragesSourcePagesOutOfTheResidentSet) {
  // A 4 MiB tensor between two small ones, and a storage of its rows [1024, 3072): a TP shard of an embedding.
  testutil::TempDir dir;
  const std::filesystem::path path = dir / "model.safetensors";
  std::vector<uint8_t> head(3, 1), tail(4, 2), embed(size_t{4096} * 1024);
  for (size_t i = 0; i < embed.size(); ++i) embed[i] = static_cast<uint8_t>(i * 2654435761u >> 11);
  const TensorData tensors[] = {{TensorSpec{"head", DType::U8, {3}}, head},
                                {TensorSpec{"embed", DType::U8, {4096, 1024}}, embed},
                                {TensorSpec{"tail", DType::U8, {4}}, tail}};
  write_safetensors(path, tensors);
  const SafetensorsFile file(path);
  const CanonicalLookup lookup = [&](const std::string& name) { return file.data(file.at(name)); };
  RuntimeStorageSpec spec;
  spec.name = "embed_shard";
  spec.dtype = DType::U8;
  spec.shape = spec.gathered_shape = {2048, 1024};
  spec.fragments = {Fragment{"embed", {4096, 1024}, 0, 1024, 2048}};
  for (const char* name : {"head", "embed", "tail"}) file.release(name);
  const uint64_t before = test::mapped_rss(path);
  std::vector<uint8_t> out(spec.bytes());
  StorageLoader(2, 1024, 64 << 10).load_mapped(spec, lookup, out);
  EXPECT_TRUE(std::equal(out.begin(), out.end(), embed.begin() + 1024 * 1024));
  // Left mapped: pages across part boundaries (8 parts at most) and the kernel's fault-around (16 pages) at both
  // ends; the plain load below keeps the whole 2 MiB.
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_LE(test::mapped_rss(path), before + 48 * page);
  std::fill(out.begin(), out.end(), 0);
  StorageLoader(2).load(spec, lookup, out);
  EXPECT_TRUE(std::equal(out.begin(), out.end(), embed.begin() + 1024 * 1024));
  EXPECT_GE(test::mapped_rss(path), before + spec.bytes());
}

TEST(StorageLoaderErrors, AWrongOutputOrCanonicalSizeIsRefusedNamingIt) {
  const ModelProfile glm = find_profile("glm-tiny-fp8", kProfiles);
  auto canonical = test::layout_canonical(glm);
  const CanonicalLookup lookup = [&](const std::string& name) { return std::span<const uint8_t>(canonical.at(name)); };
  StorageLoader loader(3, 1024);
  const std::vector<RankLayout> layouts = build_rank_layouts(glm, 1);
  for (const RuntimeStorageSpec& spec : layouts[0].storages) {
    if (spec.transform != "fp8_channel_weight" || spec.gathered_shape.size() != 3) continue;
    std::vector<uint8_t> short_out(spec.bytes() - 1);
    EXPECT_EQ(test::error_message([&] { loader.load(spec, lookup, short_out); }, ErrorKind::Mismatch),
              fmt::format("storage '{}': output buffer has {} bytes, the storage needs {}", spec.name,
                          spec.bytes() - 1, spec.bytes()));
    // One expert's canonical weight a byte short: the pieces that read it fail, and the error names both.
    const std::string tensor = spec.fragments[0].canonical;
    canonical.at(tensor).pop_back();
    std::vector<uint8_t> out(spec.bytes());
    test::expect_error([&] { loader.load(spec, lookup, out); }, ErrorKind::Mismatch,
                       {"'" + tensor + "'", "'" + spec.name + "'"});
    return;
  }
  ADD_FAILURE() << "glm-tiny-fp8 has no stacked FP8 expert weight";
}

}  // namespace
}  // namespace wsb
