// Output of `seqtrans bench`: result rows, and tiny JSON, CSV and text-table writers (no dependencies).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace seqtrans::bench {

// One value of a result row: none (JSON null, an empty CSV field), a number, or text.
using Cell = std::variant<std::monostate, double, int64_t, std::string>;

struct Field {
  std::string name;
  Cell value;
};
// A flat record; every row of one table has the same field names in the same order.
using Row = std::vector<Field>;

// Shortest text that reads back as the same double ("0.1", "1e-07"); non-finite values give "".
std::string format_number(double value);

// Writes JSON text: objects, arrays and values, with the commas and indentation handled here.
// Misuse (a value where a key is due, unbalanced ends) throws seqtrans::Error.
class JsonWriter {
 public:
  explicit JsonWriter(std::ostream& out) : out_(out) {}

  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view name);
  // Non-finite numbers become null (JSON has no NaN or infinity).
  JsonWriter& value(const Cell& cell);
  JsonWriter& value(bool flag);
  JsonWriter& value(const char* text) { return value(Cell(std::string(text))); }
  JsonWriter& value(double number) { return value(Cell(number)); }
  JsonWriter& value(int64_t number) { return value(Cell(number)); }
  JsonWriter& value(int number) { return value(Cell(static_cast<int64_t>(number))); }
  JsonWriter& value(const std::string& text) { return value(Cell(text)); }
  // An object with the row's fields in order.
  JsonWriter& row(const Row& row);
  // True once the top-level value is complete.
  bool done() const { return scopes_.empty() && wrote_top_level_; }

 private:
  struct Scope {
    bool object = false;
    int64_t count = 0;
    bool after_key = false;
  };
  void before_value();
  void write_raw_value(const std::string& text);
  void newline();

  std::ostream& out_;
  std::vector<Scope> scopes_;
  bool wrote_top_level_ = false;
};

// A JSON string literal with quotes and escapes.
std::string json_quote(std::string_view text);

// A CSV field as RFC 4180 writes it: quoted when it holds a comma, quote, CR or LF, quotes doubled.
std::string csv_field(std::string_view text);
// Header line (the first row's names) and one line per row. Rows must share the first row's names.
void write_csv(std::ostream& out, const std::vector<Row>& rows);

// A plain text table: a header line, a rule, then rows; columns padded to their widest cell and aligned
// as their column says (text left, numbers right). Cells are ASCII.
class TextTable {
 public:
  enum class Align { Left, Right };
  void add_column(std::string header, Align align = Align::Right);
  void add_row(std::vector<std::string> cells);
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> headers_;
  std::vector<Align> aligns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace seqtrans::bench
