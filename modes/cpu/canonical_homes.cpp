#include "modes/cpu/canonical_homes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>

#include "core/errors.hpp"
#include "models/layout/fragment_runs.hpp"

namespace wsb {

CanonicalHomes canonical_homes(const std::vector<TensorSpec>& tensors, const std::vector<RankLayout>& layouts,
                               std::vector<RankImage>& images) {
  if (images.size() != layouts.size()) {
    throw Error(ErrorKind::Mismatch,
                fmt::format("canonical homes: {} rank images for {} rank layouts", images.size(), layouts.size()));
  }
  std::map<std::string, size_t, std::less<>> index;
  for (size_t i = 0; i < tensors.size(); ++i) index.emplace(tensors[i].name, i);
  CanonicalHomes homes;
  homes.tensor.resize(tensors.size());
  homes.storage_of.assign(tensors.size(), CanonicalHomes::kNoHome);
  for (size_t r = 0; r < layouts.size(); ++r) {
    for (size_t s = 0; s < layouts[r].storages.size(); ++s) {
      const std::vector<FragmentRun> runs = fragment_runs(layouts[r].storages[s]);
      std::vector<size_t> homed;  // tensor index of each run
      bool whole = !runs.empty();
      for (const FragmentRun& run : runs) {
        const auto it = index.find(run.canonical);
        if (it == index.end()) {
          whole = false;
          break;
        }
        const size_t t = it->second;
        const bool taken = homes.tensor[t].data() != nullptr || std::find(homed.begin(), homed.end(), t) != homed.end();
        // The whole tensor, in order: one block, or rows whose blocks follow each other (a column slice as wide
        // as the tensor, e.g. o_proj at TP 1).
        const bool contiguous = run.outer == 1 || run.stride == run.block;
        whole = !taken && contiguous && run.src_first == 0 && run.block * run.outer == tensors[t].bytes() &&
                run.canonical_bytes == tensors[t].bytes() && run.dst_offset % kStorageAlignment == 0;
        if (!whole) break;
        homed.push_back(t);
      }
      homes.storage.push_back(whole);
      if (!whole) continue;
      const std::span<uint8_t> storage = images[r].storage(s);
      for (size_t k = 0; k < runs.size(); ++k) {
        const uint64_t bytes = runs[k].block * runs[k].outer;
        homes.tensor[homed[k]] = storage.subspan(runs[k].dst_offset, bytes);
        homes.storage_of[homed[k]] = homes.storage.size() - 1;
        homes.bytes += bytes;
      }
    }
  }
  return homes;
}

}  // namespace wsb
