// --shard K/N: parsing with exact errors, and the round-robin selection.
#include <gtest/gtest.h>

#include "harness/shard.hpp"
#include "tests/support/error_checks.hpp"
#include "core/errors.hpp"

namespace wsb {
namespace {

std::string shard_error(const std::string& text) {
  return test::error_message([&] { parse_shard(text); }, ErrorKind::Format);
}

TEST(Shard, ParsesKOfN) {
  const Shard s = parse_shard("2/5");
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.count, 5);
  EXPECT_EQ(parse_shard("0/1").count, 1);
}

TEST(Shard, ErrorsSayWhy) {
  EXPECT_EQ(shard_error("3"), "--shard '3': expected K/N (0-based shard K of N shards, e.g. 0/4)");
  EXPECT_EQ(shard_error("2/2"), "--shard '2/2': K must be 0..1 (0-based) for N = 2");
  EXPECT_EQ(shard_error("0/0"), "--shard '0/0': N must be 1..100000");
  EXPECT_EQ(shard_error("-1/4"), "--shard '-1/4': K and N must be decimal integers >= 0 (e.g. 0/4)");
  EXPECT_EQ(shard_error("a/4"), "--shard 'a/4': K and N must be decimal integers >= 0 (e.g. 0/4)");
  EXPECT_EQ(shard_error("1/"), "--shard '1/': K and N must be decimal integers >= 0 (e.g. 0/4)");
  EXPECT_EQ(shard_error("1/4/2"), "--shard '1/4/2': K and N must be decimal integers >= 0 (e.g. 0/4)");
}

TEST(Shard, TakesEveryNthCellFromK) {
  std::vector<MatrixCell> cells(7);
  for (size_t i = 0; i < cells.size(); ++i) cells[i].id = std::to_string(i);
  auto ids = [](const std::vector<MatrixCell>& v) {
    std::vector<std::string> out;
    for (const auto& c : v) out.push_back(c.id);
    return out;
  };
  EXPECT_EQ(ids(shard_cells(cells, {0, 3})), (std::vector<std::string>{"0", "3", "6"}));
  EXPECT_EQ(ids(shard_cells(cells, {1, 3})), (std::vector<std::string>{"1", "4"}));
  EXPECT_EQ(ids(shard_cells(cells, {2, 3})), (std::vector<std::string>{"2", "5"}));
  EXPECT_EQ(ids(shard_cells(cells, {0, 1})).size(), 7u);
  EXPECT_TRUE(shard_cells(cells, {8, 9}).empty());  // more shards than cells: an empty share
}

}  // namespace
}  // namespace wsb
