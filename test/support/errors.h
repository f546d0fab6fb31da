// Reading the error a call throws, for checks on its message (portable across Catch2 v2 and v3).
#pragma once

#include <string>

#include "core/error.h"

namespace seqtrans::testing {

// The message of the seqtrans::Error that `call` throws; empty when it throws none.
template <typename Call>
std::string error_of(Call call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

}  // namespace seqtrans::testing
