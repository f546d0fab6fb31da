#include <algorithm>
#include <random>
#include <vector>

#include "catch.h"
#include "core/error.h"
#include "models/position_runs.h"

using namespace seqtrans;

TEST_CASE("position runs: first fit, and freed runs merge with their neighbours", "[unit]") {
  PositionRuns runs(10);
  CHECK(runs.take(4) == 0);
  CHECK(runs.take(3) == 4);
  CHECK(runs.take(4) == -1);  // 3 left
  CHECK(runs.take(3) == 7);
  CHECK(runs.used() == 10);
  runs.give_back(0, 4);
  runs.give_back(7, 3);
  CHECK(runs.take(5) == -1);  // 4 + 3 free, apart
  runs.give_back(4, 3);       // joins both: all free
  CHECK(runs.take(10) == 0);
  runs.give_back(0, 10);
  CHECK(runs.take(2) == 0);
  CHECK(runs.take(8) == 2);  // the rest is still one run
  CHECK(runs.used() == 10);
  CHECK(PositionRuns().take(1) == -1);
  CHECK_THROWS_AS(PositionRuns(-1), Error);
}

TEST_CASE("position runs refuse runs they did not give", "[unit]") {
  PositionRuns runs(8);
  CHECK_THROWS_AS(runs.take(0), Error);
  const int64_t start = runs.take(4);
  CHECK_THROWS_AS(runs.give_back(start, 9), Error);     // past the end
  CHECK_THROWS_AS(runs.give_back(4, 2), Error);         // free already
  CHECK_THROWS_AS(runs.give_back(2, 4), Error);         // half free
  runs.give_back(start, 4);
  CHECK_THROWS_AS(runs.give_back(start, 4), Error);     // twice
}

TEST_CASE("position runs: random takes and frees never overlap and account for every position", "[unit]") {
  std::mt19937 random(7);
  PositionRuns runs(200);
  std::vector<char> owner(200, 0);
  struct Run {
    int64_t start, length;
  };
  std::vector<Run> live;
  for (int round = 0; round < 5000; ++round) {
    if (live.empty() || random() % 2 == 0) {
      const int64_t length = 1 + static_cast<int64_t>(random() % 20);
      const int64_t start = runs.take(length);
      if (start < 0) {  // then no free stretch is that long
        int64_t longest = 0, current = 0;
        for (char o : owner) longest = std::max(longest, current = o ? 0 : current + 1);
        CHECK(longest < length);
        continue;
      }
      for (int64_t p = start; p < start + length; ++p) {
        REQUIRE(owner[p] == 0);
        owner[p] = 1;
      }
      live.push_back({start, length});
    } else {
      const size_t pick = random() % live.size();
      for (int64_t p = live[pick].start; p < live[pick].start + live[pick].length; ++p) owner[p] = 0;
      runs.give_back(live[pick].start, live[pick].length);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(pick));
    }
    int64_t used = 0;
    for (char o : owner) used += o;
    REQUIRE(runs.used() == used);
  }
}
