#pragma once
// Reference forward pass of the llama family over TP-sharded runtime storages (layout of
// models/layout/llama_layout.hpp). TP ranks are emulated in one thread: each rank computes its partial sums from
// its own storages (including its own copy of every replicated norm), partials are reduced in rank order.
#include <memory>
#include <vector>

#include "models/forward/forward.hpp"

namespace wsb {

/// Throws Error(Mismatch) when layouts/storages do not match the profile's llama layout for tp = layouts.size()
/// (rank count, storage names, shapes, byte sizes), Error(Format) for an unsupported weight dtype.
std::unique_ptr<ForwardModel> make_llama_forward(const ModelProfile& profile, const std::vector<RankLayout>& layouts,
                                                 const std::vector<RankStorageView>& storages);

}  // namespace wsb
