// The shape of the pages: a README a newcomer reads in five minutes whose quick start is the two commands CI
// keeps honest, docs pages that say what they cover first, and relative links that lead somewhere.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fmt/format.h>

#include "tests/docs/markdown_scan.hpp"

namespace wsb::test {
namespace {

namespace fs = std::filesystem;

constexpr size_t kReadmeMaxLines = 150;

/// The non-empty lines of the first fenced block under the README's "## Quick start".
std::vector<std::string> quick_start_commands() {
  const std::vector<std::string> lines = read_lines(source_dir() / "README.md");
  auto it = std::find(lines.begin(), lines.end(), "## Quick start");
  EXPECT_NE(it, lines.end()) << "README.md has no \"## Quick start\" section";
  std::vector<std::string> out;
  bool fenced = false;
  for (; it != lines.end(); ++it) {
    if (it->starts_with("## ") && *it != "## Quick start") break;
    if (is_fence(*it)) {
      if (fenced) break;
      fenced = true;
      continue;
    }
    if (fenced && it->find_first_not_of(' ') != std::string::npos) out.push_back(*it);
  }
  return out;
}

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

TEST(DocsPages, TheReadmeFitsFiveMinutes) {
  const size_t n = read_lines(source_dir() / "README.md").size();
  EXPECT_LE(n, kReadmeMaxLines) << "README.md has " << n << " lines: move the detail into docs/";
}

TEST(DocsPages, TheQuickStartIsTwoCommandsAndCiRunsTheSecond) {
  const std::vector<std::string> commands = quick_start_commands();
  ASSERT_EQ(commands.size(), 2u) << fmt::format("quick start: {}", fmt::join(commands, " / "));
  for (const std::string& c : commands) {
    const std::string program = trimmed(c).substr(0, trimmed(c).find(' '));
    struct stat st{};
    ASSERT_EQ(::stat((source_dir() / program).c_str(), &st), 0) << program << " is not in the source tree";
    EXPECT_TRUE(st.st_mode & S_IXUSR) << program << " is not executable";
  }
  const std::vector<std::string> ci = read_lines(source_dir() / ".ci" / "run");
  const bool called = std::any_of(ci.begin(), ci.end(),
                                  [&](const std::string& line) { return trimmed(line) == trimmed(commands[1]); });
  EXPECT_TRUE(called) << ".ci/run does not call the quick start's second command `" << commands[1] << "`";
}

TEST(DocsPages, EveryDocsPageSaysWhatItCoversFirst) {
  const std::vector<fs::path> pages = docs_pages(source_dir());
  std::set<std::string> names;
  for (const fs::path& page : pages) names.insert(page.filename().string());
  for (const char* required : {"user-guide.md", "reading-results.md", "engines.md", "checkpoints.md",
                               "reliability.md", "design.md"}) {
    EXPECT_TRUE(names.contains(required)) << "docs/" << required << " is missing";
  }
  for (const fs::path& page : pages) {
    const std::vector<std::string> lines = read_lines(page);
    ASSERT_FALSE(lines.empty()) << page;
    EXPECT_TRUE(lines[0].starts_with("# ")) << page_name(page) << ": the first line is the title";
    auto first = std::find_if(lines.begin() + 1, lines.end(), [](const std::string& l) { return !l.empty(); });
    ASSERT_NE(first, lines.end()) << page;
    EXPECT_TRUE(first->starts_with("This page covers ")) << page_name(page) << ": the first line after the title "
                                                         << "says what the page covers, not `" << *first << "`";
  }
}

TEST(DocsPages, TheReadmeLinksEveryDocsPageAndTheExamples) {
  std::set<std::string> targets;
  for (const Link& l : relative_links(source_dir() / "README.md")) targets.insert(l.target.substr(0, l.target.find('#')));
  for (const fs::path& page : docs_pages(source_dir())) {
    EXPECT_TRUE(targets.contains("docs/" + page.filename().string())) << "README.md does not link " << page_name(page);
  }
  EXPECT_TRUE(targets.contains("docs/validation/README.md"));
  EXPECT_TRUE(targets.contains("examples/README.md"));
}

TEST(DocsPages, EveryRelativeLinkLeadsToAFileAndHeading) {
  std::vector<fs::path> pages = reader_pages(source_dir());
  pages.push_back(source_dir() / "docs" / "validation" / "README.md");
  size_t checked = 0;
  for (const fs::path& page : pages) {
    for (const Link& l : relative_links(page)) {
      ++checked;
      const size_t hash = l.target.find('#');
      const std::string file = l.target.substr(0, hash);
      const fs::path target = file.empty() ? page : page.parent_path() / file;
      ASSERT_TRUE(fs::exists(target)) << l.where << ": (" << l.target << ") leads nowhere";
      if (hash == std::string::npos) continue;
      const std::string anchor = l.target.substr(hash + 1);
      EXPECT_TRUE(heading_anchors(target).contains(anchor))
          << l.where << ": (" << l.target << "): " << page_name(target) << " has no heading #" << anchor;
    }
  }
  EXPECT_GT(checked, 30u);
}

}  // namespace
}  // namespace wsb::test
