#include "bench/emitters.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace seqtrans::bench {

std::string format_number(double value) {
  if (!std::isfinite(value)) return "";
  return fmt::format("{}", value);  // fmt prints the shortest representation that round-trips
}

std::string json_quote(std::string_view text) {
  std::string quoted = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': quoted += "\\\""; break;
      case '\\': quoted += "\\\\"; break;
      case '\n': quoted += "\\n"; break;
      case '\r': quoted += "\\r"; break;
      case '\t': quoted += "\\t"; break;
      case '\b': quoted += "\\b"; break;
      case '\f': quoted += "\\f"; break;
      default:
        // Other control characters must be escaped; bytes >= 0x80 (UTF-8) pass through.
        if (static_cast<unsigned char>(c) < 0x20)
          quoted += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        else
          quoted += c;
    }
  }
  quoted += '"';
  return quoted;
}

void JsonWriter::newline() {
  out_ << '\n';
  for (size_t i = 0; i < scopes_.size(); ++i) out_ << "  ";
}

void JsonWriter::before_value() {
  if (scopes_.empty()) {
    SEQTRANS_CHECK(!wrote_top_level_, "JSON: a second top-level value");
    wrote_top_level_ = true;
    return;
  }
  Scope& scope = scopes_.back();
  if (scope.object) {
    SEQTRANS_CHECK(scope.after_key, "JSON: an object member needs a key first");
    scope.after_key = false;
    return;
  }
  if (scope.count++ > 0) out_ << ',';
  newline();
}

void JsonWriter::write_raw_value(const std::string& text) {
  before_value();
  out_ << text;
}

JsonWriter& JsonWriter::begin_object() {
  before_value();
  out_ << '{';
  scopes_.push_back(Scope{true, 0, false});
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  before_value();
  out_ << '[';
  scopes_.push_back(Scope{false, 0, false});
  return *this;
}

JsonWriter& JsonWriter::end_object() {
  SEQTRANS_CHECK(!scopes_.empty() && scopes_.back().object && !scopes_.back().after_key,
                 "JSON: end_object without a matching begin_object");
  const bool empty = scopes_.back().count == 0;
  scopes_.pop_back();
  if (!empty) newline();
  out_ << '}';
  if (scopes_.empty()) out_ << '\n';
  return *this;
}

JsonWriter& JsonWriter::end_array() {
  SEQTRANS_CHECK(!scopes_.empty() && !scopes_.back().object, "JSON: end_array without a matching begin_array");
  const bool empty = scopes_.back().count == 0;
  scopes_.pop_back();
  if (!empty) newline();
  out_ << ']';
  if (scopes_.empty()) out_ << '\n';
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view name) {
  SEQTRANS_CHECK(!scopes_.empty() && scopes_.back().object && !scopes_.back().after_key,
                 "JSON: key '{}' outside an object", std::string(name));
  Scope& scope = scopes_.back();
  if (scope.count++ > 0) out_ << ',';
  newline();
  out_ << json_quote(name) << ": ";
  scope.after_key = true;
  return *this;
}

JsonWriter& JsonWriter::value(const Cell& cell) {
  if (const auto* number = std::get_if<double>(&cell)) {
    write_raw_value(std::isfinite(*number) ? format_number(*number) : "null");
  } else if (const auto* integer = std::get_if<int64_t>(&cell)) {
    write_raw_value(std::to_string(*integer));
  } else if (const auto* text = std::get_if<std::string>(&cell)) {
    write_raw_value(json_quote(*text));
  } else {
    write_raw_value("null");
  }
  return *this;
}

JsonWriter& JsonWriter::value(bool flag) {
  write_raw_value(flag ? "true" : "false");
  return *this;
}

JsonWriter& JsonWriter::row(const Row& row) {
  begin_object();
  for (const Field& field : row) key(field.name).value(field.value);
  return end_object();
}

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string quoted = "\"";
  for (const char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  quoted += '"';
  return quoted;
}

namespace {

std::string csv_cell(const Cell& cell) {
  if (const auto* number = std::get_if<double>(&cell)) return format_number(*number);
  if (const auto* integer = std::get_if<int64_t>(&cell)) return std::to_string(*integer);
  if (const auto* text = std::get_if<std::string>(&cell)) return csv_field(*text);
  return "";
}

}  // namespace

void write_csv(std::ostream& out, const std::vector<Row>& rows) {
  if (rows.empty()) return;
  const Row& first = rows.front();
  for (size_t i = 0; i < first.size(); ++i) out << (i ? "," : "") << csv_field(first[i].name);
  out << '\n';
  for (const Row& row : rows) {
    SEQTRANS_CHECK(row.size() == first.size(), "CSV: a row of {} fields under a header of {}", row.size(),
                   first.size());
    for (size_t i = 0; i < row.size(); ++i) {
      SEQTRANS_CHECK(row[i].name == first[i].name, "CSV: field '{}' where the header has '{}'", row[i].name,
                     first[i].name);
      out << (i ? "," : "") << csv_cell(row[i].value);
    }
    out << '\n';
  }
}

void TextTable::add_column(std::string header, Align align) {
  headers_.push_back(std::move(header));
  aligns_.push_back(align);
}

void TextTable::add_row(std::vector<std::string> cells) {
  SEQTRANS_CHECK(cells.size() == headers_.size(), "table: {} cells for {} columns", cells.size(), headers_.size());
  rows_.push_back(std::move(cells));
}

void TextTable::print(std::ostream& out) const {
  std::vector<size_t> widths(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) {
    widths[c] = headers_[c].size();
    for (const auto& row : rows_) widths[c] = std::max(widths[c], row[c].size());
  }
  const auto print_line = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c) line += "  ";
      const std::string padding(widths[c] - cells[c].size(), ' ');
      line += aligns_[c] == Align::Right ? padding + cells[c] : cells[c] + padding;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << '\n';
  };
  print_line(headers_);
  size_t total = 0;
  for (size_t width : widths) total += width;
  out << std::string(total + 2 * (widths.empty() ? 0 : widths.size() - 1), '-') << '\n';
  for (const auto& row : rows_) print_line(row);
}

}  // namespace seqtrans::bench
