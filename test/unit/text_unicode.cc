// Tests for the UTF-8 helpers: invalid-byte repair (matching Python), blank lines, whitespace strip.
#include "text/unicode.h"

#include <string>

#include "catch.h"

namespace seqtrans {
namespace {

const std::string fffd = "\xEF\xBF\xBD";

}  // namespace

TEST_CASE("to_valid_utf8 keeps valid text unchanged", "[text][unicode]") {
  const char raw[] = "Zürich € 😀 \t a\0b";
  const std::string text(raw, sizeof(raw) - 1);
  CHECK(to_valid_utf8(text) == text);
  CHECK(to_valid_utf8("") == "");
}

TEST_CASE("to_valid_utf8 replaces ill-formed bytes as Python's errors='replace' does", "[text][unicode]") {
  // Expected values are bytes.decode("utf-8", errors="replace") from CPython 3.11.
  CHECK(to_valid_utf8("\xff") == fffd);
  CHECK(to_valid_utf8("a\xe2\x82") == "a" + fffd);                    // truncated sequence: one U+FFFD
  CHECK(to_valid_utf8("\xe0\x80\x80") == fffd + fffd + fffd);        // overlong 3-byte form
  CHECK(to_valid_utf8("\xed\xa0\x80") == fffd + fffd + fffd);        // UTF-16 surrogate
  CHECK(to_valid_utf8("\xf4\x90\x80\x80") == fffd + fffd + fffd + fffd);  // above U+10FFFF
  CHECK(to_valid_utf8("\xc0\xaf") == fffd + fffd);                   // overlong 2-byte form
  CHECK(to_valid_utf8("\xf0\x9f\x98" "a") == fffd + "a");
  CHECK(to_valid_utf8("\x80\x80") == fffd + fffd);                   // stray continuation bytes
  CHECK(to_valid_utf8("\xe2(\xa1") == fffd + "(" + fffd);
  CHECK(to_valid_utf8("\xf8\x88\x80\x80\x80") == fffd + fffd + fffd + fffd + fffd);
}

TEST_CASE("is_blank accepts only whitespace and NUL", "[text][unicode]") {
  CHECK(is_blank(""));
  CHECK(is_blank("   "));
  CHECK(is_blank(" \t\r\n\v\f"));
  CHECK(is_blank(std::string("\0 \0", 3)));
  CHECK(is_blank("\xC2\xA0\xE3\x80\x80\xE2\x80\x83"));  // NBSP, ideographic space, em space
  CHECK_FALSE(is_blank("a"));
  CHECK_FALSE(is_blank("  .  "));
  CHECK_FALSE(is_blank("\xC2\x85"));  // NEL: SentencePiece keeps it as a character
  CHECK_FALSE(is_blank("\xff"));      // invalid UTF-8 is content (it becomes U+FFFD)
}

TEST_CASE("strip_whitespace strips what Python's str.strip() strips", "[text][unicode]") {
  CHECK(strip_whitespace("  a b  ") == "a b");
  CHECK(strip_whitespace("\t\n a\r\x1f") == "a");
  CHECK(strip_whitespace("\xC2\xA0" "a\xE3\x80\x80") == "a");
  CHECK(strip_whitespace("\xC2\x85" "a\xC2\x85") == "a");
  CHECK(strip_whitespace("   ") == "");
  CHECK(strip_whitespace("") == "");
  CHECK(strip_whitespace("\xE2\x96\x81x") == "\xE2\x96\x81x");  // "▁" is not whitespace
  CHECK(strip_whitespace("\xff a \x80") == "\xff a \x80");       // invalid bytes are never stripped
  CHECK(strip_whitespace("é ") == "é");
}

}  // namespace seqtrans
