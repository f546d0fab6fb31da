// Catch2 v2 is header-only: this file instantiates its runner once for every test binary.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
