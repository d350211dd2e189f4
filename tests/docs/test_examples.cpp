// examples/: every example matrix loads through the matrix parser, runs on the CPU engine only, and comes with its
// committed output and a README that names its command.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "harness/matrix.hpp"
#include "models/profile/profile.hpp"
#include "tests/docs/markdown_scan.hpp"

namespace wsb::test {
namespace {

namespace fs = std::filesystem;

/// The examples and the cell ids each one's matrix expands to.
const std::map<std::string, std::vector<std::string>> kExamples = {
    {"first-run", {"llama-tiny-bf16/disk/native/tp2", "llama-tiny-bf16/cpu/native/tp2"}},
    {"gate", {"glm-tiny-fp8/disk/native/tp2", "glm-tiny-fp8/cpu/native/tp2"}},
    {"http-engine", {"llama-tiny-bf16/disk@sglang/native/tp2"}},
};

fs::path examples_dir() { return source_dir() / "examples"; }

TEST(DocsExamples, TheFoldersAreTheThreeExamples) {
  std::set<std::string> folders;
  for (const auto& e : fs::directory_iterator(examples_dir())) {
    if (e.is_directory()) folders.insert(e.path().filename().string());
  }
  std::set<std::string> expected;
  for (const auto& [name, ids] : kExamples) expected.insert(name);
  EXPECT_EQ(folders, expected);
}

TEST(DocsExamples, EveryMatrixLoadsAndRunsOnTheCpuEngine) {
  for (const auto& [name, ids] : kExamples) {
    SCOPED_TRACE(name);
    const Matrix m = load_matrix(examples_dir() / name / "matrix.json");
    EXPECT_EQ(m.name, name);
    EXPECT_FALSE(m.description.empty());
    std::vector<std::string> got;
    for (const MatrixCell& c : m.cells) {
      got.push_back(c.id);
      EXPECT_NE(c.engine, "embedded-cuda") << c.id << ": examples run without a GPU";
      EXPECT_EQ(c.runtime, "native") << c.id << ": examples need no sandbox";
      EXPECT_EQ(find_profile(c.model, WSBENCH_PROFILES_DIR).id, c.model);
      EXPECT_TRUE(find_profile(c.model, WSBENCH_PROFILES_DIR).tiny) << c.id << ": examples run in seconds";
    }
    EXPECT_EQ(got, ids);
  }
}

TEST(DocsExamples, TheHttpExampleSpellsOutItsServerLaunchLine) {
  const Matrix m = load_matrix(examples_dir() / "http-engine" / "matrix.json");
  ASSERT_EQ(m.cells.size(), 1u);
  const MatrixCell& c = m.cells[0];
  EXPECT_TRUE(c.uses_http());
  EXPECT_EQ(c.effective_protocol(), "sglang");
  ASSERT_GE(c.server_command.size(), 3u);
  EXPECT_EQ(c.server_command[0], "{self}");
  EXPECT_EQ(c.server_command[3], "serve");
}

TEST(DocsExamples, EveryExampleHasItsOutputAndItsCommand) {
  for (const auto& [name, ids] : kExamples) {
    SCOPED_TRACE(name);
    const fs::path dir = examples_dir() / name;
    const std::string readme = read_text(dir / "README.md");
    EXPECT_NE(readme.find(fmt::format("wsbench run examples/{}/matrix.json", name)), std::string::npos)
        << "README.md names no run of its matrix";
    const std::string report = read_text(dir / "report.md");
    ASSERT_FALSE(report.empty()) << "no committed report.md";
    if (name == "gate") {
      EXPECT_NE(readme.find("wsbench report compare"), std::string::npos);
      EXPECT_NE(report.find("| Prepare ratio |"), std::string::npos);
      for (const std::string& id : ids) {
        const std::string mode = id.substr(id.find('/') + 1, id.find("/native") - id.find('/') - 1);
        EXPECT_NE(report.find(fmt::format("| glm-tiny-fp8 | {} ", mode)), std::string::npos) << id;
      }
    } else {
      EXPECT_TRUE(report.starts_with(fmt::format("# wsbench results — matrix `{}`", name)));
      for (const std::string& id : ids) {
        EXPECT_NE(report.find(fmt::format("### `{}` on ", id)), std::string::npos) << id << " has no phase table";
      }
    }
  }
  const std::string index = read_text(examples_dir() / "README.md");
  for (const auto& [name, ids] : kExamples) {
    EXPECT_NE(index.find(fmt::format("]({}/README.md)", name)), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace wsb::test
