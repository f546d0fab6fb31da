// The search's host workers: every part of every job runs exactly once, jobs never mix (a late worker
// never runs a part of the next job), workers that fell asleep wake for the next job, and what a part
// throws reaches the caller.
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "catch.h"
#include "core/worker_team.h"

using namespace seqtrans;

namespace {

// Runs `jobs` jobs of `parts` parts; each part counts its runs in its job's own row.
std::vector<std::vector<int>> run_counted(WorkerTeam& team, int jobs, int parts) {
  std::vector<std::vector<std::atomic<int>>> runs(static_cast<size_t>(jobs));
  for (auto& row : runs) row = std::vector<std::atomic<int>>(static_cast<size_t>(parts));
  for (int job = 0; job < jobs; ++job) team.run(parts, [&, job](int part) { runs[job][part].fetch_add(1); });
  std::vector<std::vector<int>> counts;
  for (const auto& row : runs) {
    counts.emplace_back();
    for (const auto& count : row) counts.back().push_back(count.load());
  }
  return counts;
}

bool every_part_once(const std::vector<std::vector<int>>& counts) {
  for (const auto& row : counts)
    for (int count : row)
      if (count != 1) return false;
  return true;
}

}  // namespace

TEST_CASE("a worker team runs every part of every job once", "[unit]") {
  for (int workers : {0, 1, 3}) {
    WorkerTeam team(workers);
    CHECK(team.size() == workers + 1);
    CHECK(every_part_once(run_counted(team, 2000, 7)));
    CHECK(every_part_once(run_counted(team, 50, 1)));
    CHECK(every_part_once(run_counted(team, 20, 300)));
    team.run(0, [](int) { FAIL("no part to run"); });
  }
}

TEST_CASE("a worker team's parts run on several threads, and sleeping workers wake for the next job", "[unit]") {
  WorkerTeam team(3);
  for (int round = 0; round < 3; ++round) {
    std::mutex mutex;
    std::set<std::thread::id> threads;
    // Parts that take a while, so that the workers claim some before the caller has run them all.
    team.run(64, [&](int) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      std::lock_guard<std::mutex> lock(mutex);
      threads.insert(std::this_thread::get_id());
    });
    CHECK(threads.size() > 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past the spin: the workers sleep
  }
}

TEST_CASE("what a worker team's part throws reaches the caller after the other parts ran", "[unit]") {
  WorkerTeam team(2);
  std::atomic<int> ran{0};
  CHECK_THROWS_WITH(team.run(16,
                             [&](int part) {
                               ran.fetch_add(1);
                               if (part == 5) throw std::runtime_error("part 5 failed");
                             }),
                    "part 5 failed");
  CHECK(ran.load() == 16);
  CHECK(every_part_once(run_counted(team, 100, 5)));  // and the team goes on
}
