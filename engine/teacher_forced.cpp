#include "engine/teacher_forced.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "engine/cuda/device_storages.hpp"
#include "engine/host_storages.hpp"
#include "engine/kernels/device_forward.hpp"
#include "models/checkpoint/checkpoint.hpp"
#include "models/forward/forward.hpp"
#include "models/layout/tp_layout.hpp"

namespace wsb {
namespace {

std::vector<std::vector<float>> run_sequence(const ForwardModel& model, std::span<const int32_t> tokens) {
  auto sequence = model.new_sequence();
  std::vector<std::vector<float>> rows(tokens.size());
  for (size_t t = 0; t < tokens.size(); ++t) model.step(*sequence, tokens[t], rows[t]);
  return rows;
}

}  // namespace

std::vector<std::vector<float>> teacher_forced_logits(const ModelProfile& profile,
                                                      const std::filesystem::path& checkpoint, int tp,
                                                      const std::string& backend, std::span<const int32_t> tokens) {
  if (tokens.empty()) throw Error(ErrorKind::Format, "forward: the token sequence is empty");
  if (backend != "cpu" && backend != "cuda") {
    throw Error(ErrorKind::Format, fmt::format("forward: backend '{}' is unknown (expected \"cpu\" or \"cuda\")", backend));
  }
  // Tokens are checked before anything is loaded: a typo should not cost a model load.
  for (int32_t token : tokens) check_token(profile.id, token, profile.dims.vocab);
  const std::vector<RankLayout> layouts = build_rank_layouts(profile, tp);
  CheckpointReader reader(checkpoint);
  for (const TensorSpec& tensor : profile.canonical_tensors()) expect_tensor(reader, tensor, checkpoint.string());
  const CanonicalLookup lookup = [&reader](const std::string& name) { return reader.data(name); };

  if (backend == "cpu") {
    HostStorages storages(layouts);
    std::vector<RankStorageView> views(layouts.size());
    for (size_t r = 0; r < layouts.size(); ++r) {
      for (size_t s = 0; s < layouts[r].storages.size(); ++s) {
        auto out = storages.storage(static_cast<int>(r), s);
        load_storage(layouts[r].storages[s], lookup, out);
        views[r].storages.push_back(out);
      }
    }
    return run_sequence(*make_forward(profile, layouts, views), tokens);
  }
  auto storages = make_device_storages(layouts, DeviceStorageOptions{});
  std::vector<uint8_t> staging;
  for (size_t r = 0; r < layouts.size(); ++r) {
    for (size_t s = 0; s < layouts[r].storages.size(); ++s) {
      const RuntimeStorageSpec& spec = layouts[r].storages[s];
      staging.resize(spec.bytes());
      load_storage(spec, lookup, staging);
      storages->write(static_cast<int>(r), s, 0, staging);
      storages->synchronize();  // the staging buffer is reused by the next storage
    }
  }
  DeviceForwardOptions options;
  options.max_sequences = 1;
  options.max_positions = static_cast<int>(std::max<size_t>(tokens.size(), 1));
  return run_sequence(*make_device_forward(profile, layouts, storages->views(), options), tokens);
}

}  // namespace wsb
