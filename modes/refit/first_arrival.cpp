#include "modes/refit/first_arrival.hpp"

#include <algorithm>
#include <memory>

namespace wsb::refit {

class FirstArrival::Receiver final : public ReceiverEndpoint {
 public:
  Receiver(FirstArrival& owner, int rank) : owner_(owner), rank_(rank) {}
  ReceivedBatch receive(std::span<uint8_t> into) override {
    ReceivedBatch batch = owner_.inner_.receiver(rank_).receive(into);
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(owner_.mu_);
    auto& first = owner_.first_[static_cast<size_t>(rank_)];
    if (!first) first = now;
    return batch;
  }
  void cancel(const std::string& reason) noexcept override { owner_.inner_.receiver(rank_).cancel(reason); }

 private:
  FirstArrival& owner_;
  int rank_;
};

FirstArrival::FirstArrival(Transport& inner) : inner_(inner), first_(static_cast<size_t>(inner.ranks())) {
  for (int r = 0; r < inner.ranks(); ++r) receivers_.push_back(std::make_unique<Receiver>(*this, r));
}

FirstArrival::~FirstArrival() = default;

ReceiverEndpoint& FirstArrival::receiver(int rank) { return *receivers_.at(static_cast<size_t>(rank)); }

std::optional<double> FirstArrival::seconds_since(std::chrono::steady_clock::time_point since) const {
  std::lock_guard lock(mu_);
  std::chrono::steady_clock::time_point last = since;
  for (const auto& first : first_) {
    if (!first) return std::nullopt;
    last = std::max(last, *first);
  }
  return std::chrono::duration<double>(last - since).count();
}

}  // namespace wsb::refit
