// The benchmark's own JSON, CSV and text-table writers.
#include "bench/emitters.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "catch.h"
#include "core/error.h"

namespace seqtrans::bench {

TEST_CASE("bench numbers print in their shortest round-trip form", "[bench]") {
  CHECK(format_number(0.1) == "0.1");
  CHECK(format_number(2.0) == "2");
  CHECK(format_number(1e-7) == "1e-07");
  CHECK(std::stod(format_number(1.0 / 3.0)) == 1.0 / 3.0);
  CHECK(format_number(std::nan("")).empty());
  CHECK(format_number(std::numeric_limits<double>::infinity()).empty());
}

TEST_CASE("bench JSON: strings are escaped", "[bench]") {
  CHECK(json_quote("plain") == "\"plain\"");
  CHECK(json_quote("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(json_quote("line\nnext\ttab") == "\"line\\nnext\\ttab\"");
  CHECK(json_quote(std::string("\x01", 1)) == "\"\\u0001\"");
  CHECK(json_quote("Gr\xc3\xbc\xc3\x9f" "e") == "\"Gr\xc3\xbc\xc3\x9f" "e\"");  // UTF-8 passes through
}

TEST_CASE("bench JSON: nested objects and arrays, null for missing and non-finite values", "[bench]") {
  std::ostringstream out;
  JsonWriter json(out);
  json.begin_object();
  json.key("name").value("bench");
  json.key("runs").value(5);
  json.key("list").begin_array().value(1.5).value(Cell()).value(std::nan("")).end_array();
  json.key("empty").begin_array().end_array();
  json.key("row").row(Row{{"a", int64_t{1}}, {"b", std::string("x")}});
  json.key("flag").value(true);
  json.end_object();
  CHECK(json.done());
  CHECK(out.str() ==
        "{\n"
        "  \"name\": \"bench\",\n"
        "  \"runs\": 5,\n"
        "  \"list\": [\n"
        "    1.5,\n"
        "    null,\n"
        "    null\n"
        "  ],\n"
        "  \"empty\": [],\n"
        "  \"row\": {\n"
        "    \"a\": 1,\n"
        "    \"b\": \"x\"\n"
        "  },\n"
        "  \"flag\": true\n"
        "}\n");
}

TEST_CASE("bench JSON: misuse is an error", "[bench]") {
  std::ostringstream out;
  JsonWriter json(out);
  json.begin_object();
  CHECK_THROWS_AS(json.value(1), Error);      // a value without a key
  CHECK_THROWS_AS(json.end_array(), Error);   // wrong closing
  json.key("k");
  CHECK_THROWS_AS(json.key("again"), Error);  // two keys in a row
  CHECK_THROWS_AS(json.end_object(), Error);  // a key without its value
  json.value(1).end_object();
  CHECK_THROWS_AS(json.begin_array(), Error);  // a second top-level value
}

TEST_CASE("bench CSV: RFC 4180 quoting", "[bench]") {
  CHECK(csv_field("plain") == "plain");
  CHECK(csv_field("a,b") == "\"a,b\"");
  CHECK(csv_field("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(csv_field("two\nlines") == "\"two\nlines\"");
  CHECK(csv_field("").empty());
}

TEST_CASE("bench CSV: a header from the first row, empty fields for missing values", "[bench]") {
  std::ostringstream out;
  write_csv(out, {Row{{"batch", int64_t{16}}, {"idea", std::string("fused, top-k")}, {"x_of_floor", 2.5}},
                  Row{{"batch", int64_t{64}}, {"idea", std::string("plain")}, {"x_of_floor", Cell()}}});
  CHECK(out.str() ==
        "batch,idea,x_of_floor\n"
        "16,\"fused, top-k\",2.5\n"
        "64,plain,\n");

  std::ostringstream bad;
  CHECK_THROWS_AS(write_csv(bad, {Row{{"a", 1.0}}, Row{{"b", 1.0}}}), Error);
  CHECK_THROWS_AS(write_csv(bad, {Row{{"a", 1.0}}, Row{{"a", 1.0}, {"b", 2.0}}}), Error);
}

TEST_CASE("bench text table: padded columns, text left and numbers right", "[bench]") {
  TextTable table;
  table.add_column("idea", TextTable::Align::Left);
  table.add_column("speedup");
  table.add_row({"fused top-k", "1.50x"});
  table.add_row({"naive", "12.00x"});
  std::ostringstream out;
  table.print(out);
  CHECK(out.str() ==
        "idea         speedup\n"
        "--------------------\n"
        "fused top-k    1.50x\n"
        "naive         12.00x\n");
  CHECK_THROWS_AS(table.add_row({"one cell"}), Error);
}

}  // namespace seqtrans::bench
