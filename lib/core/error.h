// Error reporting: every failure inside the library is a seqtrans::Error carrying what and where.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace seqtrans {

// The one exception type the library throws; the CLI prints what() as one line.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A device allocation failed. The scheduler catches it and retries with fewer sentences in flight; anywhere
// else it is an Error like any other.
class OutOfMemoryError : public Error {
 public:
  explicit OutOfMemoryError(const std::string& message) : Error(message) {}
};

// `text` with its control characters (line ends, escape, ...) written as \xNN: text from files or other
// outside sources quoted in an error message keeps the message one line and cannot drive the terminal.
inline std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f)
      out += fmt::format("\\x{:02x}", byte);
    else
      out += c;
  }
  return out;
}

}  // namespace seqtrans

// Throws seqtrans::Error with a formatted message when the condition does not hold.
#define SEQTRANS_CHECK(condition, ...)                                  \
  do {                                                                  \
    if (!(condition)) throw ::seqtrans::Error(fmt::format(__VA_ARGS__)); \
  } while (false)
