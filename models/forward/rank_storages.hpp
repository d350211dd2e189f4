#pragma once
// The runtime storages of every TP rank as both forward backends bind them: each rank's layout with one address per
// storage (host bytes for the CPU reference, device addresses for the CUDA forward), and the lookup of a storage by
// name that every family's weight binding (family_weights.hpp) goes through.
#include <cstdint>
#include <string_view>
#include <vector>

#include "models/forward/forward.hpp"
#include "models/forward/quant_linear.hpp"

namespace wsb {

/// One address per runtime storage of a rank, index-aligned with RankLayout::storages: host bytes or device
/// addresses (the lookup never dereferences them).
using StorageAddresses = std::vector<const uint8_t*>;

/// Every rank's layout with its storage addresses.
class RankStorages {
 public:
  /// Rank r is `layouts[r]` with `addresses[r]`. Throws Error(Mismatch) when the counts of ranks or of a rank's
  /// storages differ. The StorageRefs handed out point into `layouts`, which this object keeps (moving it keeps
  /// them valid; a copy's refs point into the copy).
  RankStorages(std::vector<RankLayout> layouts, std::vector<StorageAddresses> addresses);

  int tp() const { return static_cast<int>(layouts_.size()); }
  /// Storage `name` (runtime name, no tensor prefix) of `rank`: its spec and its address. Throws Error(Missing)
  /// naming the storage and the rank when the layout has no such storage.
  StorageRef ref(int rank, std::string_view name) const;
  /// ref(rank, name) checked to hold `dtype` with runtime shape `shape` (norms, biases, sinks): Error(Mismatch)
  /// naming the storage otherwise (require_storage).
  StorageRef vec(int rank, std::string_view name, DType dtype, const Shape& shape) const;

 private:
  std::vector<RankLayout> layouts_;
  std::vector<StorageAddresses> addresses_;
};

/// The CPU reference's input checks and binding: `layouts` must equal build_rank_layouts(profile, layouts.size())
/// rank by rank (rank numbering, storage names, dtypes, shapes, transforms) and every host view must have its
/// storage's byte size. Returns those layouts with the views' host addresses. Throws Error(Mismatch)
/// "profile '<id>': reference forward: ..." naming the rank and storage, and what build_rank_layouts throws for an
/// unsupported tp.
RankStorages bind_host_storages(const ModelProfile& profile, const std::vector<RankLayout>& layouts,
                                const std::vector<RankStorageView>& storages);

}  // namespace wsb
