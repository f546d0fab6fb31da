// Error reporting: every failure inside the library is a seqtrans::Error carrying what and where.
#pragma once

#include <stdexcept>
#include <string>

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

}  // namespace seqtrans

// Throws seqtrans::Error with a formatted message when the condition does not hold.
#define SEQTRANS_CHECK(condition, ...)                                  \
  do {                                                                  \
    if (!(condition)) throw ::seqtrans::Error(fmt::format(__VA_ARGS__)); \
  } while (false)
