#include "models/forward/rank_storages.hpp"

#include <fmt/format.h>

#include <utility>

#include "core/errors.hpp"

namespace wsb {

namespace {

[[noreturn]] void mismatch(const std::string& id, const std::string& what) {
  throw Error(ErrorKind::Mismatch, fmt::format("profile '{}': reference forward: {}", id, what));
}

}  // namespace

RankStorages::RankStorages(std::vector<RankLayout> layouts, std::vector<StorageAddresses> addresses)
    : layouts_(std::move(layouts)), addresses_(std::move(addresses)) {
  if (addresses_.size() != layouts_.size())
    throw Error(ErrorKind::Mismatch, fmt::format("rank storages: {} rank layouts but {} address lists",
                                                 layouts_.size(), addresses_.size()));
  for (size_t r = 0; r < layouts_.size(); ++r) {
    if (addresses_[r].size() != layouts_[r].storages.size())
      throw Error(ErrorKind::Mismatch, fmt::format("rank storages: rank {} has {} storages but {} addresses", r,
                                                   layouts_[r].storages.size(), addresses_[r].size()));
  }
}

StorageRef RankStorages::ref(int rank, std::string_view name) const {
  const RankLayout& layout = layouts_[static_cast<size_t>(rank)];
  const size_t index = layout.index_of(name);
  return {&layout.storages[index], addresses_[static_cast<size_t>(rank)][index]};
}

StorageRef RankStorages::vec(int rank, std::string_view name, DType dtype, const Shape& shape) const {
  return require_storage(ref(rank, name), dtype, shape);
}

RankStorages bind_host_storages(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                                const std::vector<RankStorageView>& storages) {
  if (layouts.empty()) mismatch(p.id, "no rank layouts");
  if (storages.size() != layouts.size())
    mismatch(p.id, fmt::format("{} rank layouts but {} storage views", layouts.size(), storages.size()));
  const int tp = static_cast<int>(layouts.size());
  std::vector<RankLayout> expected = build_rank_layouts(p, tp);
  std::vector<StorageAddresses> addresses;
  for (int r = 0; r < tp; ++r) {
    const RankLayout& got = layouts[static_cast<size_t>(r)];
    const RankLayout& want = expected[static_cast<size_t>(r)];
    const auto& views = storages[static_cast<size_t>(r)].storages;
    if (got.rank != r || got.tp != tp)
      mismatch(p.id, fmt::format("layout {} is for rank {} of tp {}, expected rank {} of tp {}", r, got.rank, got.tp,
                                 r, tp));
    if (got.storages.size() != want.storages.size() || views.size() != want.storages.size())
      mismatch(p.id, fmt::format("rank {}: {} layout storages and {} views, the {} layout has {}", r,
                                 got.storages.size(), views.size(), p.family, want.storages.size()));
    for (size_t i = 0; i < want.storages.size(); ++i) {
      const RuntimeStorageSpec& g = got.storages[i];
      const RuntimeStorageSpec& w = want.storages[i];
      if (g.name != w.name || g.shape != w.shape || g.dtype != w.dtype || g.transform != w.transform)
        mismatch(p.id, fmt::format("rank {} storage {}: '{}' {} {} ({}) differs from the {} layout's '{}' {} {} ({})",
                                   r, i, g.name, dtype_name(g.dtype), shape_string(g.shape), g.transform, p.family,
                                   w.name, dtype_name(w.dtype), shape_string(w.shape), w.transform));
      if (views[i].size() != w.bytes())
        mismatch(p.id, fmt::format("rank {} storage '{}': view has {} bytes, layout declares {}", r, w.name,
                                   views[i].size(), w.bytes()));
    }
    StorageAddresses a;
    a.reserve(views.size());
    for (const std::span<const uint8_t>& v : views) a.push_back(v.data());
    addresses.push_back(std::move(a));
  }
  return RankStorages(std::move(expected), std::move(addresses));
}

}  // namespace wsb
