// Every `wsbench <command>` and every `--option` that README.md, docs/ and examples/ name exists in the built
// executable (its --help), and the README names every command wsbench lists.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <regex>

#include "tests/docs/markdown_scan.hpp"
#include "tests/docs/wsbench_help.hpp"

namespace wsb::test {
namespace {

namespace fs = std::filesystem;

/// Options the pages quote from other programs, or that wsbench keeps out of its help: a bare `--option` span
/// naming one of these is not a wsbench option that went missing.
const std::map<std::string, std::string> kNotWsbenchOptions = {
    {"--model-path", "SGLang's launch_server (docs/engines.md launch lines)"},
    {"--tokenizer-path", "SGLang's launch_server"},
    {"--base-gpu-id", "SGLang's launch_server, which the cell field base_gpu_id mirrors"},
    {"--weight-update-staging", "the staging fork's launch_server"},
    {"--enable-host-runtime-weight-update", "the Stitch v0.5.15 host-runtime fork's launch_server"},
    {"--fault", "wsbench serve's hidden test-only option (engine_api/serve.hpp ServeFaults)"},
};

/// `wsbench ...` as a page names it, with the options written after the command.
struct Mention {
  std::string where;
  std::string text;
  std::vector<std::string> global_options;  ///< before the command (`wsbench --profiles DIR models`)
  std::vector<std::string> path;            ///< command and subcommands, e.g. {"report", "compare"}
  std::vector<std::string> options;
};

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string strip(std::string w, const std::string& lead, const std::string& trail) {
  const size_t b = w.find_first_not_of(lead);
  if (b == std::string::npos) return "";
  w = w.substr(b);
  while (!w.empty() && trail.find(w.back()) != std::string::npos) w.pop_back();
  return w;
}

bool is_wsbench(const std::string& word) {
  const std::string w = strip(word, "'\"([", "");
  return w == "wsbench" || w.ends_with("/wsbench");
}

/// The long options a word holds ("[--quiet" -> "--quiet", "--out=DIR" -> "--out").
std::vector<std::string> long_options(const std::string& word) {
  static const std::regex option(R"((?:^|[^A-Za-z0-9-])(--[A-Za-z0-9][A-Za-z0-9-]*))");
  std::vector<std::string> out;
  for (std::sregex_iterator it(word.begin(), word.end(), option), end; it != end; ++it) out.push_back((*it)[1]);
  return out;
}

/// Every `wsbench <command>` in one piece of code. A mention ends at a shell separator or the next wsbench.
std::vector<Mention> mentions(const CodeText& code, HelpCache& helps) {
  static const std::regex command_word("[a-z][a-z0-9-]*");
  static const std::set<std::string> separators{"&&", "||", ";", "|"};
  const std::vector<std::string> w = words(code.text);
  std::vector<Mention> out;
  for (size_t i = 0; i < w.size(); ++i) {
    if (!is_wsbench(w[i])) continue;
    Mention m{code.where, code.text, {}, {}, {}};
    size_t j = i + 1;
    while (j < w.size() && w[j].starts_with("--") && !long_options(w[j]).empty()) {
      m.global_options.push_back(long_options(w[j]).front());
      j += w[j].find('=') == std::string::npos ? 2 : 1;  // the option's value
    }
    if (j >= w.size()) continue;
    const std::string command = strip(w[j], "", ",.;:)'\"`");
    if (!std::regex_match(command, command_word)) continue;  // `wsbench <command>`, `wsbench`'s
    m.path = {command};
    size_t k = j + 1;
    for (; k < w.size(); ++k) {
      const Help* help = helps.get(m.path);
      const std::string sub = strip(w[k], "", ",.;:)'\"`");
      if (help == nullptr || !help->subcommands.contains(sub)) break;
      m.path.push_back(sub);
    }
    for (; k < w.size() && !separators.contains(w[k]) && !is_wsbench(w[k]); ++k) {
      for (const std::string& o : long_options(w[k])) m.options.push_back(o);
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::string joined(const std::vector<std::string>& path) { return fmt::format("{}", fmt::join(path, " ")); }

struct Scan {
  std::vector<Mention> mentions;
  std::vector<CodeText> bare_options;  ///< spans that start with an option: `--shard K/N`
};

/// One cache and one scan for the whole suite: every --help is a process start.
HelpCache& helps() {
  static HelpCache cache;
  return cache;
}

Scan scan_pages_once(HelpCache& helps) {
  Scan scan;
  for (const fs::path& page : reader_pages(source_dir())) {
    EXPECT_TRUE(fs::exists(page)) << page;
    for (const CodeText& code : code_texts(page)) {
      for (Mention& m : mentions(code, helps)) scan.mentions.push_back(std::move(m));
      if (!code.fenced && code.text.starts_with("--")) scan.bare_options.push_back(code);
    }
  }
  return scan;
}

const Scan& scan_pages() {
  static const Scan scan = scan_pages_once(helps());
  return scan;
}

TEST(DocsCommands, TheExecutableAnswersHelp) {
  HelpCache& helps = wsb::test::helps();
  const Help* top = helps.get({});
  ASSERT_NE(top, nullptr) << "no usable `" << wsbench_exe() << " --help`";
  EXPECT_TRUE(top->options.contains("--profiles"));
  EXPECT_TRUE(top->subcommands.contains("run"));
  // An unknown command answers with the top-level help: it must not pass for a command.
  EXPECT_EQ(helps.get({"no-such-command"}), nullptr);
  EXPECT_EQ(helps.get({"report", "no-such-command"}), nullptr);
  const Help* compare = helps.get({"report", "compare"});
  ASSERT_NE(compare, nullptr);
  EXPECT_EQ(compare->options, (std::set<std::string>{"--help", "--max-regression", "--format", "--out"}));
}

TEST(DocsCommands, EveryNamedCommandExists) {
  HelpCache& helps = wsb::test::helps();
  const Scan& scan = scan_pages();
  ASSERT_GT(scan.mentions.size(), 50u) << "the pages name wsbench commands in code spans";
  for (const Mention& m : scan.mentions) {
    EXPECT_NE(helps.get(m.path), nullptr)
        << m.where << ": `wsbench " << joined(m.path) << "` is no wsbench command (in `" << m.text << "`)";
  }
}

TEST(DocsCommands, EveryOptionWrittenAfterACommandIsThatCommands) {
  HelpCache& helps = wsb::test::helps();
  const Scan& scan = scan_pages();
  const Help* top = helps.get({});
  ASSERT_NE(top, nullptr);
  size_t checked = 0;
  for (const Mention& m : scan.mentions) {
    for (const std::string& o : m.global_options) {
      EXPECT_TRUE(top->options.contains(o)) << m.where << ": `wsbench " << o << "` is no global option";
    }
    const Help* help = helps.get(m.path);
    if (help == nullptr) continue;  // reported by EveryNamedCommandExists
    for (const std::string& o : m.options) {
      ++checked;
      EXPECT_TRUE(help->options.contains(o))
          << m.where << ": `wsbench " << joined(m.path) << "` has no option " << o << " (in `" << m.text << "`)";
    }
  }
  EXPECT_GT(checked, 80u);
}

TEST(DocsCommands, EveryBareOptionIsSomeCommandsOrNamedAsAnothersProgram) {
  HelpCache& helps = wsb::test::helps();
  const Scan& scan = scan_pages();
  // The options of the top level and of every command a page names, hidden ones (`wsbench cell`) included.
  helps.get({});
  for (const Mention& m : scan.mentions) helps.get(m.path);
  std::set<std::string> all;
  for (const auto& path : helps.known()) {
    for (const std::string& o : helps.get(path)->options) all.insert(o);
  }
  std::set<std::string> foreign_used;
  for (const CodeText& code : scan.bare_options) {
    for (const std::string& o : long_options(code.text)) {
      if (kNotWsbenchOptions.contains(o)) {
        foreign_used.insert(o);
        continue;
      }
      EXPECT_TRUE(all.contains(o)) << code.where << ": `" << code.text << "`: no wsbench command has " << o;
    }
  }
  // The exceptions stay in use, so that none outlives its page.
  for (const auto& [o, why] : kNotWsbenchOptions) {
    EXPECT_TRUE(foreign_used.contains(o)) << o << " (" << why << ") is named by no page any more";
  }
}

TEST(DocsCommands, TheReadmeNamesEveryCommandWsbenchLists) {
  HelpCache& helps = wsb::test::helps();
  std::set<std::string> named;
  for (const CodeText& code : code_texts(source_dir() / "README.md")) {
    for (const Mention& m : mentions(code, helps)) named.insert(joined(m.path));
  }
  const Help* top = helps.get({});
  ASSERT_NE(top, nullptr);
  for (const std::string& command : top->subcommands) {
    const Help* help = helps.get({command});
    ASSERT_NE(help, nullptr) << command;
    // A command with subcommands (`report`) is named through them.
    if (help->subcommands.empty()) {
      EXPECT_TRUE(named.contains(command))
          << "README.md names no `wsbench " << command << "`: add a line to its Commands table";
    }
    for (const std::string& sub : help->subcommands) {
      EXPECT_TRUE(named.contains(command + " " + sub))
          << "README.md names no `wsbench " << command << " " << sub << "`: add a line to its Commands table";
    }
  }
}

}  // namespace
}  // namespace wsb::test
