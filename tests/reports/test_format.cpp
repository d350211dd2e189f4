// Number formatting rules of reports/format.hpp.
#include "reports/format.hpp"

#include <gtest/gtest.h>

#include "reports/table.hpp"

namespace wsb {
namespace {

TEST(ReportsFormat, RangeUsesEnDashAndThreeDecimalsBelowTen) {
  EXPECT_EQ(format_duration_range(0.512, 0.530), "0.512\u20130.530 s");
  EXPECT_EQ(format_duration_range(1.002, 1.005), "1.002\u20131.005 s");
}

TEST(ReportsFormat, RangeCollapsesToOneValueWhenEndsPrintTheSame) {
  EXPECT_EQ(format_duration_range(20.44, 20.44), "20.44 s");
  EXPECT_EQ(format_duration_range(20.441, 20.444), "20.44 s");
}

TEST(ReportsFormat, RangeUsesDecimalsOfTheLargerEnd) {
  EXPECT_EQ(format_duration_range(138.95, 482.49), "138.95\u2013482.49 s");
  EXPECT_EQ(format_duration_range(9.5, 10.2), "9.50\u201310.20 s");
}

TEST(ReportsFormat, SecondsDecimalsFollowMagnitude) {
  EXPECT_EQ(format_seconds(20.436), "20.44");
  EXPECT_EQ(format_seconds(2.7549), "2.755");
  EXPECT_EQ(format_seconds(0.0), "0.000");
  EXPECT_EQ(format_seconds(0.000412), "0.000412");  // 3 significant digits below 10 ms
  EXPECT_EQ(format_seconds(0.005), "0.00500");
  EXPECT_EQ(format_seconds(9.9996), "10.00");  // rounds across the 10 s boundary without a third decimal
  EXPECT_EQ(duration_decimals(1e-12), 9);
}

TEST(ReportsFormat, MeanWithAndWithoutInterval) {
  EXPECT_EQ(format_mean_ci(2.0, 2.484137711843753), "2.000 \u00b1 2.484 s");
  EXPECT_EQ(format_mean_ci(20.5, 0.3), "20.50 \u00b1 0.30 s");
  EXPECT_EQ(format_mean_ci(0.75, std::nullopt), "0.750 s \u00b1 n/a");
}

TEST(ReportsFormat, BytesAreDecimalSi) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1500), "1.50 kB");
  EXPECT_EQ(format_bytes(16.06e9), "16.06 GB");
  EXPECT_EQ(format_bytes(999999), "1.00 MB");
  EXPECT_EQ(format_bytes(207.47e9), "207.47 GB");
}

TEST(ReportsFormat, KindDrivesValueFormattingAndUnits) {
  EXPECT_EQ(format_value({"x", MetricKind::Bandwidth}, 55.5), "55.50");
  EXPECT_EQ(format_value({"x", MetricKind::Count}, 3.0), "3");
  EXPECT_EQ(format_value({"x", MetricKind::Raw}, 0.5123), "0.5123");
  EXPECT_EQ(format_value({"x", MetricKind::Duration}, Value()), "n/a");
  EXPECT_EQ(metric_unit(MetricKind::Duration), "s");
  EXPECT_EQ(metric_unit(MetricKind::Bandwidth), "GB/s");
  EXPECT_EQ(metric_unit(MetricKind::Bytes), "");
  EXPECT_EQ(format_value({"x", MetricKind::Percent}, 1.234), "1.23");
  EXPECT_EQ(metric_unit(MetricKind::Percent), "%");
}

TEST(ReportsFormat, ValueOfWrongTypeForKindNamesTheColumn) {
  try {
    format_value({"Pause range", MetricKind::DurationRange}, 1.0);
    FAIL() << "expected std::logic_error";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("'Pause range'"), std::string::npos) << e.what();
  }
}

TEST(ReportsFormat, DisplayWidthCountsCodePoints) {
  EXPECT_EQ(display_width("0.512\u20130.530 s"), 13u);
  EXPECT_EQ(display_width("\u00b1"), 1u);
}

}  // namespace
}  // namespace wsb
