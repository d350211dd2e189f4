// `wsbench models`: one unreadable profile is reported by name while every other profile is still listed.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "cli/commands.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

namespace fs = std::filesystem;

TEST(CliModels, AnUnreadableProfileIsReportedAndTheOthersListed) {
  test::TempDir dir;
  fs::copy_file(fs::path(WSBENCH_PROFILES_DIR) / "llama-tiny-bf16.json", dir / "llama-tiny-bf16.json");
  fs::copy_file(fs::path(WSBENCH_PROFILES_DIR) / "glm-tiny-fp8.json", dir / "glm-tiny-fp8.json");
  std::ofstream(dir / "broken.json") << "{\"id\": \"broken\", \"family\": ";
  std::ostringstream out, err;
  EXPECT_EQ(cmd_models(dir.path(), 1, out, err), 2);
  const std::string listed = out.str();
  EXPECT_NE(listed.find("\n  glm-tiny-fp8 "), std::string::npos);
  EXPECT_NE(listed.find("\n  llama-tiny-bf16 "), std::string::npos);
  EXPECT_EQ(listed.find("broken"), std::string::npos);
  EXPECT_EQ(err.str(), "wsbench models: " + (dir / "broken.json").string() +
                           ": invalid JSON: [json.exception.parse_error.101] parse error at line 1, column 28: syntax "
                           "error while parsing value - unexpected end of input; expected '[', '{', or a literal\n"
                           "wsbench models: 1 of 3 profiles could not be read\n");
}

TEST(CliModels, AllReadableExitsZero) {
  test::TempDir dir;
  fs::copy_file(fs::path(WSBENCH_PROFILES_DIR) / "llama-tiny-bf16.json", dir / "llama-tiny-bf16.json");
  std::ostringstream out, err;
  EXPECT_EQ(cmd_models(dir.path(), 2, out, err), 0);
  EXPECT_EQ(err.str(), "");
  EXPECT_EQ(out.str().rfind("# profile ", 0), 0u);
  EXPECT_NE(out.str().find("\n  llama-tiny-bf16 "), std::string::npos);
}

TEST(CliModels, MissingFolderIsAnError) {
  test::TempDir dir;
  std::ostringstream out, err;
  EXPECT_THROW(cmd_models(dir / "absent", 1, out, err), Error);
  EXPECT_EQ(out.str(), "");
}

}  // namespace
}  // namespace wsb
