#include "modes/sync/sync_state.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"
#include "publication/store.hpp"

namespace wsb {

void SyncStateMachine::set_staging_enabled(bool enabled) {
  std::lock_guard lock(mu_);
  staging_enabled_ = enabled;
}

PrepareTicket SyncStateMachine::begin_prepare(uint32_t target) {
  std::lock_guard lock(mu_);
  const std::string t = version_string(target);
  if (!staging_enabled_) throw Error(ErrorKind::State, fmt::format("prepare {}: weight-update staging is off", t));
  if (preparing_) throw Error(ErrorKind::State, fmt::format("prepare {}: another prepare is pending", t));
  if (committing_) throw Error(ErrorKind::State, fmt::format("prepare {}: a commit is in progress", t));
  if (prepared_ && target == *prepared_) return PrepareTicket{PrepareAction::AlreadyPrepared, served_};
  if (target <= served_) {
    throw Error(ErrorKind::State,
                fmt::format("prepare {}: target is not newer than the served version {}", t, version_string(served_)));
  }
  if (prepared_ && target < *prepared_) {
    throw Error(ErrorKind::State, fmt::format("prepare {}: target is older than the prepared version {}", t,
                                              version_string(*prepared_)));
  }
  preparing_ = true;
  return PrepareTicket{PrepareAction::Build, served_};
}

void SyncStateMachine::finish_prepare(uint32_t target, bool ok, std::optional<uint32_t> still_prepared) {
  std::lock_guard lock(mu_);
  preparing_ = false;
  prepared_ = ok ? std::optional<uint32_t>(target) : still_prepared;
}

void SyncStateMachine::begin_commit(uint32_t target) {
  std::lock_guard lock(mu_);
  const std::string t = version_string(target);
  if (preparing_) throw Error(ErrorKind::State, fmt::format("commit {}: a prepare is pending", t));
  if (committing_) throw Error(ErrorKind::State, fmt::format("commit {}: another commit is in progress", t));
  if (!prepared_) throw Error(ErrorKind::State, fmt::format("commit {}: nothing is prepared", t));
  if (*prepared_ != target) {
    throw Error(ErrorKind::State,
                fmt::format("commit {}: the prepared version is {}", t, version_string(*prepared_)));
  }
  committing_ = true;
}

void SyncStateMachine::finish_commit(uint32_t target, bool ok) {
  std::lock_guard lock(mu_);
  committing_ = false;
  if (!ok) return;
  served_ = target;
  prepared_.reset();
}

uint32_t SyncStateMachine::served() const {
  std::lock_guard lock(mu_);
  return served_;
}

std::optional<uint32_t> SyncStateMachine::prepared() const {
  std::lock_guard lock(mu_);
  return prepared_;
}

bool SyncStateMachine::preparing() const {
  std::lock_guard lock(mu_);
  return preparing_;
}

}  // namespace wsb
