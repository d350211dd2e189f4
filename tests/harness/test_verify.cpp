// The probe tally of one trial (harness/verify.hpp): exact fingerprints at one version, responses whose steps span
// two versions (failed unless the cell accepts mixed responses, then counted and not judged), aborted responses
// counted and not judged, and a real server's responses in flight across the commit when it reports no step
// versions. generation_during_prepare of a prepare that returned, of one that threw, and of a commit that threw
// after it.
#include <gtest/gtest.h>

#include "harness/verify.hpp"

namespace wsb {
namespace {

const UpdateWindow kWindow{1.0, 2.0, 3.0, 4.0};

ProbeSample sample(double sent, double received, uint32_t version, std::string fp, std::vector<uint32_t> steps = {}) {
  ProbeSample s;
  s.sent = sent;
  s.received = received;
  s.version = version;
  s.fingerprint = std::move(fp);
  s.step_versions = std::move(steps);
  return s;
}

TEST(TallyProbes, ExactResponsesAtEitherVersionPass) {
  const ProbeTally t = tally_probes({sample(0.1, 0.2, 0, "a", {0, 0}), sample(4.1, 4.2, 1, "b", {1, 1})}, kWindow,
                                    ProbeExpectation{"a", 1, "b", false});
  EXPECT_EQ(t.wrong, 0);
  EXPECT_EQ(t.mixed, 0);
  EXPECT_EQ(t.before_commit, 1);
  EXPECT_EQ(t.after_commit, 1);
  EXPECT_EQ(check_probes_exact(t).pass, true);
}

TEST(TallyProbes, AfterEarlierUpdatesTheVersionBeforeTheCommitIsTheirs) {
  // The cell updated to 1 before the measured update 1 -> 3: responses before the commit carry 1, never 0.
  ProbeExpectation expect{"one", 3, "three", false};
  expect.from = 1;
  const ProbeTally t = tally_probes({sample(0.1, 0.2, 1, "one"), sample(4.1, 4.2, 3, "three")}, kWindow, expect);
  EXPECT_EQ(t.wrong, 0);
  EXPECT_EQ(t.before_commit, 1);
  const ProbeTally stale = tally_probes({sample(0.1, 0.2, 0, "zero")}, kWindow, expect);
  EXPECT_EQ(stale.wrong, 2);
  EXPECT_EQ(stale.first_wrong, "response at version 000000 has fingerprint zero");
  EXPECT_EQ(check_update_changes_fingerprint("one", "three", 1).detail, "v1 one vs target three");
  EXPECT_EQ(check_update_changes_fingerprint("zero", "three").detail, "v0 zero vs target three");
  // An identity update after an earlier one: the fingerprint of `from` must stay.
  const Check kept = check_update_changes_fingerprint("one", "one", 1, true);
  EXPECT_EQ(kept.name, "identity_keeps_fingerprint");
  EXPECT_TRUE(kept.pass);
  EXPECT_EQ(kept.detail, "identity update (density 0): v1 one vs target one");
  EXPECT_FALSE(check_update_changes_fingerprint("one", "three", 1, true).pass);
}

TEST(TallyProbes, AResponseSpanningTwoVersionsFailsUnlessAccepted) {
  const std::vector<ProbeSample> samples{sample(2.9, 3.5, 1, "mix", {0, 0, 1, 1})};
  const ProbeTally strict = tally_probes(samples, kWindow, ProbeExpectation{"a", 1, "b", false});
  EXPECT_EQ(strict.mixed, 1);
  EXPECT_EQ(strict.wrong, 1);
  EXPECT_EQ(strict.first_wrong,
            "a response's steps span versions 000000 and 000001 (in_place pause; the cell does not accept mixed "
            "responses)");
  const ProbeTally accepted = tally_probes(samples, kWindow, ProbeExpectation{"a", 1, "b", true});
  EXPECT_EQ(accepted.mixed, 1);
  EXPECT_EQ(accepted.wrong, 0);
}

TEST(TallyProbes, AbortedResponsesAreCountedNotJudged) {
  ProbeSample aborted = sample(2.9, 3.1, 0, "partial", {0, 0});
  aborted.aborted = true;
  const ProbeTally t = tally_probes({aborted}, kWindow, ProbeExpectation{"a", 1, "b", false});
  EXPECT_EQ(t.aborted, 1);
  EXPECT_EQ(t.wrong, 0);
}

TEST(TallyProbes, WithoutStepVersionsOnlyAnAcceptedCellSparesAResponseAcrossTheCommit) {
  // A real server reports no step versions: the response in flight across the commit may be mixed.
  const std::vector<ProbeSample> samples{sample(2.9, 3.5, 1, "mix")};
  EXPECT_EQ(tally_probes(samples, kWindow, ProbeExpectation{"a", 1, "b", true}).wrong, 0);
  const ProbeTally strict = tally_probes(samples, kWindow, ProbeExpectation{"a", 1, "b", false});
  EXPECT_EQ(strict.wrong, 1);
  EXPECT_EQ(strict.first_wrong, "response at version 000001 has fingerprint mix");
  // After the commit nothing is spared.
  EXPECT_EQ(tally_probes({sample(4.1, 4.2, 1, "mix")}, kWindow, ProbeExpectation{"a", 1, "b", true}).wrong, 1);
}

TEST(GenerationDuringPrepare, CountsTheDecodeStepsInsideTheWindow) {
  ProbeSample s = sample(0.9, 1.7, 0, "a", {0, 0, 0});
  s.step_times = {1.2, 1.4, 1.6};
  const Check c = check_generation_during_prepare({s}, kWindow, true, 1);
  EXPECT_EQ(c.name, "generation_during_prepare");
  EXPECT_TRUE(c.pass);
  EXPECT_EQ(c.detail, "3 decode steps and 1 complete responses (all at v0) inside the 1 s prepare; median step 0.2 s");
}

TEST(GenerationDuringPrepare, APrepareThatThrewHasNoWindowAndSaysSo) {
  // The trial records no prepare end when prepare throws: the window is not end - start (a negative duration).
  const UpdateWindow threw{16.0, 0.0, 0.0, 0.0};
  const Check c = check_generation_during_prepare({sample(16.1, 16.2, 0, "a", {0, 0})}, threw, false, 0);
  EXPECT_FALSE(c.pass);
  EXPECT_EQ(c.detail, "the prepare did not return: no prepare window to count decode steps in");
}

TEST(GenerationDuringPrepare, ACommitThatThrewAfterTheWindowFailsAndSaysSo) {
  ProbeSample s = sample(0.9, 1.7, 0, "a", {0, 0, 0});
  s.step_times = {1.2, 1.4, 1.6};
  const Check c = check_generation_during_prepare({s}, kWindow, false, 1);
  EXPECT_FALSE(c.pass);
  EXPECT_EQ(c.detail, "3 decode steps and 1 complete responses (all at v0) inside the 1 s prepare; median step 0.2 s; "
                      "the update failed after the prepare (see update_succeeds)");
}

}  // namespace
}  // namespace wsb
