#include "engine/kernels/view_checks.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace wsb {

namespace {

[[noreturn]] void mismatch(const std::string& id, const std::string& what) {
  throw Error(ErrorKind::Mismatch, fmt::format("profile '{}': device forward: {}", id, what));
}

}  // namespace

void check_device_views(const std::string& id, const std::vector<RankLayout>& expected,
                        const std::vector<RankLayout>& layouts, const std::vector<DeviceRankView>& views) {
  if (layouts.empty()) mismatch(id, "no rank layouts");
  const size_t tp = layouts.size();
  if (views.size() != tp) mismatch(id, fmt::format("{} rank layouts but {} device views", tp, views.size()));
  if (expected.size() != tp) mismatch(id, fmt::format("{} rank layouts, the family builds {}", tp, expected.size()));
  for (size_t r = 0; r < tp; ++r) {
    const RankLayout& got = layouts[r];
    const RankLayout& want = expected[r];
    const DeviceRankView& view = views[r];
    if (got.rank != static_cast<int>(r) || got.tp != static_cast<int>(tp))
      mismatch(id, fmt::format("layout {} is for rank {} of tp {}, expected rank {} of tp {}", r, got.rank, got.tp, r,
                               tp));
    if (got.storages.size() != want.storages.size())
      mismatch(id, fmt::format("rank {}: {} layout storages, the family's layout has {}", r, got.storages.size(),
                               want.storages.size()));
    if (view.storages.size() != want.storages.size() || view.bytes.size() != want.storages.size())
      mismatch(id, fmt::format("rank {}: device view has {} addresses and {} sizes for {} storages", r,
                               view.storages.size(), view.bytes.size(), want.storages.size()));
    for (size_t i = 0; i < want.storages.size(); ++i) {
      const RuntimeStorageSpec& g = got.storages[i];
      const RuntimeStorageSpec& w = want.storages[i];
      if (g.name != w.name || g.shape != w.shape || g.dtype != w.dtype || g.transform != w.transform)
        mismatch(id, fmt::format("rank {} storage {}: '{}' {} {} ({}) differs from the family layout's '{}' {} {} ({})",
                                 r, i, g.name, dtype_name(g.dtype), shape_string(g.shape), g.transform, w.name,
                                 dtype_name(w.dtype), shape_string(w.shape), w.transform));
      if (view.bytes[i] != w.bytes())
        mismatch(id, fmt::format("rank {} storage '{}': view has {} bytes, layout declares {}", r, w.name,
                                 view.bytes[i], w.bytes()));
      if (view.storages[i] == nullptr) mismatch(id, fmt::format("rank {} storage '{}': null device address", r, w.name));
      if (reinterpret_cast<uintptr_t>(view.storages[i]) % dtype_size(w.dtype) != 0)
        mismatch(id, fmt::format("rank {} storage '{}': device address {} is not aligned to its {}-byte elements", r,
                                 w.name, static_cast<const void*>(view.storages[i]), dtype_size(w.dtype)));
    }
  }
}

}  // namespace wsb
