#pragma once
// A report table: typed columns (MetricKind) and typed values, rendered either as GitHub markdown or as
// aligned plain text for terminals (nccl-tests style: '#'-prefixed header and units lines).
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "reports/format.hpp"

namespace wsb {

/// min..max of a duration, seconds.
struct Range {
  double min = 0;
  double max = 0;
};

/// Mean with an optional 95% half-width, seconds.
struct MeanCI {
  double mean = 0;
  std::optional<double> half_width;
};

/// One table value. A default-constructed Value is missing and prints as "n/a" in any column. Text columns
/// take text; DurationRange takes Range; DurationMeanCI takes MeanCI; every other kind takes a number.
/// (A plain tagged struct rather than std::variant: g++ 12 reports false maybe-uninitialized errors for
/// variants holding std::string under -Werror.)
class Value {
 public:
  enum class Type { Missing, Text, Number, Range, MeanCI };
  Value() = default;
  Value(std::string text) : type_(Type::Text), text_(std::move(text)) {}  // NOLINT: implicit by design
  Value(const char* text) : type_(Type::Text), text_(text) {}              // NOLINT
  Value(double number) : type_(Type::Number), number_(number) {}           // NOLINT
  Value(Range range) : type_(Type::Range), range_(range) {}                // NOLINT
  Value(MeanCI mean_ci) : type_(Type::MeanCI), mean_ci_(mean_ci) {}       // NOLINT

  Type type() const { return type_; }
  const std::string& text() const { return text_; }
  double number() const { return number_; }
  const Range& range() const { return range_; }
  const MeanCI& mean_ci() const { return mean_ci_; }

 private:
  Type type_ = Type::Missing;
  std::string text_;
  double number_ = 0;
  Range range_;
  MeanCI mean_ci_;
};

struct Column {
  std::string header;
  MetricKind kind = MetricKind::Text;
};

struct Table {
  std::vector<Column> columns;
  std::vector<std::vector<Value>> rows;  ///< each row has columns.size() values
};

/// Formats `value` per `column.kind`. Throws std::logic_error naming the column when the value's type does not
/// fit the kind (a programming error in a table builder).
std::string format_value(const Column& column, const Value& value);

/// GitHub markdown: header, alignment row (text left, numbers right), then a units row such as "(s)" when a
/// column's kind has a unit (metric_unit), then the rows. Cells are padded so the source lines up; '|' in text
/// is escaped and newlines become spaces. Ends with a newline. Throws std::logic_error on a row of wrong width.
std::string render_markdown(const Table& table);

/// Plain text: "# " + headers, "# " + units line (when any unit), rows prefixed by two spaces, columns separated
/// by two spaces, text left- and numbers right-aligned, no trailing spaces. Ends with a newline.
std::string render_text(const Table& table);

/// Display width of UTF-8 text in code points (en dash and ± count as one column).
size_t display_width(const std::string& text);

}  // namespace wsb
