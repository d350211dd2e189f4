// The soak (harness/soak.hpp): the flatness arithmetic, its table, option errors, and a short run whose updates
// follow the documented pattern (disk/cpu alternating, each mode real/identity alternating) and are all exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <tuple>

#include "harness/process_resources.hpp"
#include "harness/soak.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

namespace fs = std::filesystem;

TEST(SoakFlatness, StartEndAndLargestDeviationFromTheStart) {
  const SoakFigure f = flatness("RSS", "bytes", {1000, 1010, 990, 1005});
  EXPECT_EQ(f.resource, "RSS");
  EXPECT_EQ(f.unit, "bytes");
  EXPECT_EQ(f.start, 1000);
  EXPECT_EQ(f.end, 1005);
  EXPECT_DOUBLE_EQ(f.max_deviation, 0.01);
  EXPECT_TRUE(f.judged);
  EXPECT_EQ(flatness("fds", "fds", {0, 0}).max_deviation, 0);
  EXPECT_EQ(flatness("fds", "fds", {0, 3}).max_deviation, 1);
  EXPECT_THROW(flatness("none", "bytes", {}), std::invalid_argument);
}

SoakResult figures_only() {
  SoakResult r;
  r.cycles = 0;
  r.max_deviation = 0.02;
  r.figures = {flatness("RSS", "bytes", {1000, 1010}), flatness("open file descriptors", "fds", {20, 21})};
  SoakFigure host = flatness("page cache, host", "bytes", {100, 150});
  host.judged = false;
  host.note = "not judged";
  r.figures.push_back(host);
  return r;
}

TEST(SoakTable, OneRowPerResourceWithAUnitsRowAndTheVerdict) {
  EXPECT_EQ(render_text(soak_table(figures_only())),
            "# resource               unit   start   end  max deviation  limit  verdict\n"
            "#                                                      (%)    (%)\n"
            "  RSS                    bytes   1000  1010           1.00   2.00  flat\n"
            "  open file descriptors  fds       20    21           5.00   2.00  NOT FLAT\n"
            "  page cache, host       bytes    100   150          50.00    n/a  not judged\n");
}

TEST(SoakResultPass, AJudgedFigureBeyondTheLimitFailsAnUnjudgedOneDoesNot) {
  SoakResult r = figures_only();
  EXPECT_FALSE(r.passed());  // the fds moved 5%
  r.figures.erase(r.figures.begin() + 1);
  EXPECT_TRUE(r.passed());   // the host's page cache moved 50%, but is not judged
  r.reference_failure = "disk engine vs native load: storage rank 0 'x' differs";
  EXPECT_FALSE(r.passed());
}

TEST(SoakOptionsCheck, RefusesAWindowWithoutBothModesAndANonEmptyWorkdir) {
  test::TempDir dir;
  SoakOptions o;
  o.profile = test::tiny_profile();
  o.workdir = dir / "soak";
  o.cycles = 13;
  o.warmup = 10;
  test::expect_error([&] { run_soak(o); }, ErrorKind::Format,
                     {"--cycles 13 must exceed --warmup 10 by at least 4 (one period: disk real, cpu real, disk "
                      "identity, cpu identity)"});
  o.cycles = 14;
  fs::create_directories(o.workdir);
  std::ofstream(o.workdir / "precious.txt") << "x";
  test::expect_error([&] { run_soak(o); }, ErrorKind::State, {"soak workdir '" + o.workdir.string() + "' is not empty"});
}

TEST(SoakRun, ShortRunAlternatesModesAndDeltasAndEveryUpdateIsExact) {
  test::TempDir dir;
  SoakOptions o;
  o.profile = test::tiny_profile();
  o.workdir = dir / "soak";
  o.cycles = 6;
  o.warmup = 2;
  const SoakResult r = run_soak(o);
  ASSERT_EQ(r.cycles_run.size(), 6u);
  const std::vector<std::tuple<std::string, bool, uint32_t>> expected{
      {"disk", false, 1}, {"cpu", false, 1}, {"disk", true, 2}, {"cpu", true, 2}, {"disk", false, 3}, {"cpu", false, 3}};
  for (size_t i = 0; i < expected.size(); ++i) {
    const SoakCycle& c = r.cycles_run[i];
    EXPECT_EQ(std::make_tuple(c.mode, c.identity, c.version), expected[i]) << "cycle " << i;
    EXPECT_EQ(c.failure, "") << "cycle " << i;
    EXPECT_GT(c.rss_peak_bytes, 0u);
    EXPECT_GT(c.open_fds, 0u);
  }
  EXPECT_EQ(r.exact_updates(), 6u);
  EXPECT_EQ(r.reference_failure, "");
  std::vector<std::string> judged, shown;
  for (const SoakFigure& f : r.figures) (f.judged ? judged : shown).push_back(f.resource);
  EXPECT_EQ(judged, (std::vector<std::string>{"RSS", "page cache, soak files", "open file descriptors"}));
  EXPECT_EQ(std::vector<std::string>(shown.begin(), shown.begin() + 2),
            (std::vector<std::string>{"RSS peak, disk cycles", "RSS peak, cpu cycles"}));
  // Applied publications are pruned: the store holds FULL v0 and the newest only.
  std::vector<std::string> published;
  for (const auto& e : fs::directory_iterator(o.workdir / "store" / "updates")) published.push_back(e.path().filename());
  std::sort(published.begin(), published.end());
  EXPECT_EQ(published, (std::vector<std::string>{"weight_v000000", "weight_v000003"}));
}

TEST(ProcessResources, CountsOpenDescriptorsAndCachedPagesOfAFolder) {
  test::TempDir dir;
  const uint64_t before = open_fd_count();
  {
    std::ifstream held(WSBENCH_PROFILES_DIR "/llama-tiny-bf16.json");
    EXPECT_EQ(open_fd_count(), before + 1);
  }
  EXPECT_EQ(open_fd_count(), before);
  std::ofstream(dir / "page.bin") << std::string(8192, 'x');
  EXPECT_EQ(page_cache_bytes(dir.path()), 8192u);  // just written: in the page cache
  EXPECT_EQ(page_cache_bytes(dir / "absent"), 0u);
  EXPECT_GT(resident_bytes().value_or(0), 0u);
}

}  // namespace
}  // namespace wsb
