#pragma once
// Reading the project's markdown pages in the docs tests: which pages, their code (inline spans and fenced lines),
// their relative links, and the anchors GitHub gives their headings.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace wsb::test {

/// The source tree: WSBENCH_FIXTURES_DIR is <source>/tests/fixtures.
inline std::filesystem::path source_dir() {
  return std::filesystem::path(WSBENCH_FIXTURES_DIR).parent_path().parent_path();
}

/// A whole file as text; empty when it cannot be read.
inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The file split into lines (no line ends).
inline std::vector<std::string> read_lines(const std::filesystem::path& path) {
  std::vector<std::string> out;
  std::istringstream in(read_text(path));
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

/// The docs pages of docs/ itself (docs/*.md), sorted. docs/validation/ is left out: dated records of the commands
/// as they were then.
inline std::vector<std::filesystem::path> docs_pages(const std::filesystem::path& source) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(source / "docs")) {
    if (e.is_regular_file() && e.path().extension() == ".md") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// Every page a reader is sent to for commands: README.md, docs/*.md, examples/README.md, examples/*/README.md.
inline std::vector<std::filesystem::path> reader_pages(const std::filesystem::path& source) {
  std::vector<std::filesystem::path> out{source / "README.md"};
  for (const auto& p : docs_pages(source)) out.push_back(p);
  out.push_back(source / "examples" / "README.md");
  std::vector<std::filesystem::path> examples;
  for (const auto& e : std::filesystem::directory_iterator(source / "examples")) {
    if (e.is_directory()) examples.push_back(e.path() / "README.md");
  }
  std::sort(examples.begin(), examples.end());
  out.insert(out.end(), examples.begin(), examples.end());
  return out;
}

/// The page as errors name it: its path in the source tree.
inline std::string page_name(const std::filesystem::path& page) {
  return std::filesystem::relative(page, source_dir()).string();
}

/// A fence line of a fenced code block (``` possibly indented, as inside a list item).
inline bool is_fence(const std::string& line) {
  const size_t text = line.find_first_not_of(' ');
  return text != std::string::npos && line.compare(text, 3, "```") == 0;
}

/// One piece of code on a page: an inline code span, or one line of a fenced block.
struct CodeText {
  std::string where;  ///< "page:line"
  std::string text;
  bool fenced = false;
};

/// Inline spans are found per paragraph (lines joined by a space: a span may wrap lines, never a blank line);
/// fenced lines are cut at a shell comment (" #").
inline std::vector<CodeText> code_texts(const std::filesystem::path& page) {
  const std::vector<std::string> lines = read_lines(page);
  const std::string name = page_name(page);
  std::vector<CodeText> out;
  bool fenced = false;
  std::string paragraph;
  size_t paragraph_line = 0;
  const std::regex span("`([^`]+)`");
  auto flush = [&] {
    for (std::sregex_iterator it(paragraph.begin(), paragraph.end(), span), end; it != end; ++it) {
      out.push_back({name + ":" + std::to_string(paragraph_line), (*it)[1].str(), false});
    }
    paragraph.clear();
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (is_fence(line)) {
      flush();
      fenced = !fenced;
      continue;
    }
    if (fenced) {
      std::string code = line;
      if (const size_t hash = code.find(" #"); hash != std::string::npos) code.resize(hash);
      out.push_back({name + ":" + std::to_string(i + 1), code, true});
      continue;
    }
    if (line.find_first_not_of(" \t") == std::string::npos) {
      flush();
      continue;
    }
    if (paragraph.empty()) paragraph_line = i + 1;
    paragraph += line + " ";
  }
  flush();
  return out;
}

/// A relative link `[text](target)` outside code, with the page line it is on.
struct Link {
  std::string where;
  std::string target;  ///< path, path#anchor or #anchor
};

inline std::vector<Link> relative_links(const std::filesystem::path& page) {
  std::vector<Link> out;
  const std::vector<std::string> lines = read_lines(page);
  const std::regex link(R"(\]\(([^)\s]+)\))");
  bool fenced = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (is_fence(lines[i])) fenced = !fenced;
    if (fenced) continue;
    for (std::sregex_iterator it(lines[i].begin(), lines[i].end(), link), end; it != end; ++it) {
      const std::string target = (*it)[1].str();
      if (target.find("://") != std::string::npos || target.starts_with("mailto:")) continue;
      out.push_back({page_name(page) + ":" + std::to_string(i + 1), target});
    }
  }
  return out;
}

/// The anchor GitHub gives a heading: lower case, backticks and punctuation other than '-' and '_' dropped, spaces
/// to '-'. ("Sync modes (`modes/`)" -> "sync-modes-modes").
inline std::string github_anchor(const std::string& heading) {
  std::string out;
  for (const unsigned char c : heading) {
    if (std::isalnum(c) || c == '-' || c == '_') {
      out += static_cast<char>(std::tolower(c));
    } else if (c == ' ') {
      out += '-';
    } else if (c >= 0x80) {
      out += static_cast<char>(c);  // GitHub keeps non-ASCII letters
    }
  }
  return out;
}

/// The anchors of every heading of a page (outside fenced code).
inline std::set<std::string> heading_anchors(const std::filesystem::path& page) {
  std::set<std::string> out;
  bool fenced = false;
  for (const std::string& line : read_lines(page)) {
    if (is_fence(line)) fenced = !fenced;
    if (fenced || !line.starts_with("#")) continue;
    const size_t text = line.find_first_not_of('#');
    if (text == std::string::npos || line[text] != ' ') continue;
    out.insert(github_anchor(line.substr(text + 1)));
  }
  return out;
}

}  // namespace wsb::test
