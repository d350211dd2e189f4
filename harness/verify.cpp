#include "harness/verify.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "publication/store.hpp"

namespace wsb {
namespace {

Check make_check(const char* name, bool pass, std::string detail) {
  Check c;
  c.name = name;
  c.pass = pass;
  c.detail = std::move(detail);
  return c;
}

struct StepStats {
  int inside = 0;              ///< decode steps that ended inside [begin, end]
  double median_interval = 0;  ///< median gap between consecutive decode steps, seconds
};

StepStats step_stats(const std::vector<ProbeSample>& samples, double begin, double end) {
  std::vector<double> times;
  for (const auto& s : samples) times.insert(times.end(), s.step_times.begin(), s.step_times.end());
  std::sort(times.begin(), times.end());
  StepStats stats;
  std::vector<double> gaps;
  for (size_t i = 0; i < times.size(); ++i) {
    if (times[i] >= begin && times[i] <= end) ++stats.inside;
    if (i > 0) gaps.push_back(times[i] - times[i - 1]);
  }
  if (!gaps.empty()) {
    std::nth_element(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 2), gaps.end());
    stats.median_interval = gaps[gaps.size() / 2];
  }
  return stats;
}

}  // namespace

void CheckList::add(Check check) {
  if (!check.pass && reason_.empty()) reason_ = check.name + ": " + check.detail;
  checks_.push_back(std::move(check));
}

void CheckList::skip(const char* name, const std::string& why) {
  Check c = make_check(name, true, why);
  c.extra["skipped"] = true;
  checks_.push_back(std::move(c));
}

std::string checksum_diff(const Checksums& actual, const Checksums& expected) {
  if (actual.size() != expected.size()) return fmt::format("{} ranks vs {}", actual.size(), expected.size());
  std::vector<std::string> diffs;
  for (size_t r = 0; r < actual.size(); ++r) {
    for (const auto& [name, hash] : expected[r]) {
      auto it = actual[r].find(name);
      if (it == actual[r].end() || it->second != hash) diffs.push_back(fmt::format("rank {} '{}'", r, name));
    }
    if (actual[r].size() != expected[r].size()) diffs.push_back(fmt::format("rank {} storage count", r));
  }
  if (diffs.empty()) return "";
  if (diffs.size() > 3) {
    const size_t total = diffs.size();
    diffs.resize(3);
    diffs.push_back(fmt::format("... {} in all", total));
  }
  return fmt::format("{}", fmt::join(diffs, ", "));
}

std::string pointer_diff(const std::vector<std::vector<StoragePointer>>& a,
                         const std::vector<std::vector<StoragePointer>>& b) {
  if (a.size() != b.size()) return "rank count changed";
  for (size_t r = 0; r < a.size(); ++r) {
    if (a[r].size() != b[r].size()) return fmt::format("rank {} storage count changed", r);
    for (size_t s = 0; s < a[r].size(); ++s) {
      if (!(a[r][s] == b[r][s])) {
        return fmt::format("rank {} '{}' moved {:#x}/{} -> {:#x}/{}", r, a[r][s].name, a[r][s].address,
                           a[r][s].bytes, b[r][s].address, b[r][s].bytes);
      }
    }
  }
  return "";
}

ProbeTally tally_probes(const std::vector<ProbeSample>& samples, const UpdateWindow& w,
                        const ProbeExpectation& expect) {
  const std::string& fp0 = expect.fp0;
  const uint32_t target = expect.target;
  const std::string& target_fp = expect.target_fp;
  ProbeTally t;
  t.responses = static_cast<int>(samples.size());
  auto wrong = [&t](std::string what) {
    ++t.wrong;
    if (t.first_wrong.empty()) t.first_wrong = std::move(what);
  };
  for (const auto& s : samples) {
    t.restarts += s.restarts;
    if (!s.error.empty()) {
      ++t.errors;
      if (t.first_wrong.empty()) t.first_wrong = "error: " + s.error;
      continue;
    }
    const auto [lo, hi] = s.step_versions.empty()
                              ? std::pair{s.version, s.version}
                              : std::pair{*std::min_element(s.step_versions.begin(), s.step_versions.end()),
                                          *std::max_element(s.step_versions.begin(), s.step_versions.end())};
    // An engine that reports no step versions (a real server) cannot show the mix: with mixed responses accepted,
    // a response in flight across the commit is counted as possibly mixed and its fingerprint not judged.
    const bool spanned_commit = s.step_versions.empty() && expect.accept_mixed && w.commit_start > 0 &&
                                s.sent < w.commit_end && s.received > w.commit_start;
    const bool mixed = lo != hi || spanned_commit;
    if (mixed) {
      ++t.mixed;
      if (!expect.accept_mixed) {
        wrong(fmt::format("a response's steps span versions {} and {} (in_place pause; the cell does not accept "
                          "mixed responses)",
                          version_string(lo), version_string(hi)));
      }
    }
    if (s.aborted) ++t.aborted;
    const bool judged = !s.aborted && !mixed;
    const bool ok =
        (s.version == expect.from && s.fingerprint == fp0) || (s.version == target && s.fingerprint == target_fp);
    if (judged && !ok) {
      wrong(fmt::format("response at version {} has fingerprint {}", version_string(s.version), s.fingerprint));
    }
    if (w.prepare_end > 0 && s.received > w.prepare_start && s.received < w.prepare_end) ++t.during_prepare;
    if (w.commit_start > 0 && s.received < w.commit_start) {
      ++t.before_commit;
      if (s.version != expect.from) wrong("a response before commit reported " + version_string(s.version));
    }
    if (w.commit_end > 0 && s.sent > w.commit_end) {
      ++t.after_commit;
      if (s.version != target) wrong("a response after commit reported " + version_string(s.version));
    }
    if (s.version == target && t.first_target < 0) t.first_target = s.received;
  }
  return t;
}

Check check_fresh_engines_agree(const std::string& fp0, const std::string& previous) {
  return make_check(check_names::kFreshEnginesAgree, fp0 == previous,
                    fmt::format("v0 fingerprint {} vs previous trial {}", fp0, previous));
}

Check check_update_changes_fingerprint(const std::string& fp0, const std::string& target_fp, uint32_t from,
                                       bool identity) {
  if (identity) {
    return make_check(check_names::kIdentityKeepsFingerprint, fp0 == target_fp,
                      fmt::format("identity update (density 0): v{} {} vs target {}", from, fp0, target_fp));
  }
  return make_check(check_names::kUpdateChangesFingerprint, fp0 != target_fp,
                    fmt::format("v{} {} vs target {}", from, fp0, target_fp));
}

Check check_update_succeeds(const std::string& error) {
  return make_check(check_names::kUpdateSucceeds, error.empty(), error.empty() ? "prepare and commit returned" : error);
}

Check check_probes_exact(const ProbeTally& t) {
  return make_check(check_names::kProbesExact, t.errors == 0 && t.wrong == 0,
                    t.first_wrong.empty()
                        ? fmt::format("{} responses, each at one version with its exact fingerprint", t.responses)
                        : t.first_wrong);
}

Check check_generation_during_prepare(const std::vector<ProbeSample>& samples, const UpdateWindow& w, bool update_ok,
                                      int responses_during_prepare) {
  // A window shorter than a few scheduler time slices (kKernelSliceS) or three decode steps cannot be required to
  // contain one: on a busy 2-core machine the kernel may run only prepare's threads for that long.
  constexpr double kKernelSliceS = 0.020;
  // A prepare that threw has no end time, so it has no window to count decode steps in.
  if (w.prepare_end == 0) {
    return make_check(check_names::kGenerationDuringPrepare, false,
                      "the prepare did not return: no prepare window to count decode steps in");
  }
  const StepStats steps = step_stats(samples, w.prepare_start, w.prepare_end);
  const double window = w.prepare_end - w.prepare_start;
  const bool generated = steps.inside > 0 || window < std::max(kKernelSliceS, 3 * steps.median_interval);
  // A prepare that returned before a failed commit still had its window: the counts stay, and the detail says the
  // update failed so that it does not read as a success beside a failed check.
  return make_check(check_names::kGenerationDuringPrepare, update_ok && generated,
                    fmt::format("{} decode steps and {} complete responses (all at v0) inside the {:.3g} s prepare; "
                                "median step {:.3g} s{}",
                                steps.inside, responses_during_prepare, window, steps.median_interval,
                                update_ok ? "" : "; the update failed after the prepare (see update_succeeds)"));
}

Check check_probes_after_commit(const ProbeTally& t) {
  return make_check(check_names::kProbesAfterCommit, t.after_commit > 0,
                    fmt::format("{} responses sent after commit at the target", t.after_commit));
}

Check check_version_is_target(uint32_t served, uint32_t target) {
  return make_check(check_names::kVersionIsTarget, served == target,
                    fmt::format("served {} expected {}", version_string(served), version_string(target)));
}

Check check_checksums_equal_native_load(const Checksums& actual, const Checksums& native, uint32_t target) {
  const std::string diff = checksum_diff(actual, native);
  return make_check(check_names::kChecksumsEqualNativeLoad, diff.empty(),
                    diff.empty() ? fmt::format("{} ranks equal a fresh native load of {}", actual.size(),
                                               version_string(target))
                                 : "differ: " + diff);
}

Check check_storage_pointers_unchanged(const std::vector<std::vector<StoragePointer>>& before,
                                       const std::vector<std::vector<StoragePointer>>& after) {
  const std::string moved = pointer_diff(before, after);
  return make_check(check_names::kStoragePointersUnchanged, moved.empty(),
                    moved.empty() ? "every storage kept address and size" : moved);
}

Check check_missing_target_rejected(const MissingTargetOutcome& o) {
  // An engine whose rejections carry no kind (a fork without error_kind) cannot say "missing": any rejection counts.
  const bool rejected = !o.accepted && o.kind &&
                        (*o.kind == ErrorKind::Missing || (!o.engine_reports_kinds && *o.kind == ErrorKind::State));
  std::string detail;
  if (o.accepted) {
    detail = fmt::format("prepare {} was accepted", version_string(o.missing));
  } else if (rejected && !o.unchanged) {
    detail = "rejected but version/checksums/fingerprint changed";
  } else {
    detail = fmt::format("rejected ({}): {}", o.kind ? error_kind_name(*o.kind) : "?", o.message);
  }
  return make_check(check_names::kMissingTargetRejected, rejected && o.unchanged, detail);
}

Check check_engine_answers(const std::string& error) { return make_check(check_names::kEngineAnswers, false, error); }

}  // namespace wsb
