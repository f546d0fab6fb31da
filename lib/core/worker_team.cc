#include "core/worker_team.h"

#include <chrono>

namespace seqtrans {
namespace {

using Clock = std::chrono::steady_clock;

// How long an idle worker spins before it sleeps: a few decoder steps.
constexpr auto kSpinTime = std::chrono::milliseconds(2);

constexpr int kMaxParts = 0xffff;  // what a ticket holds; more run on the caller alone

// A ticket: generation (32 bits), parts of the job (16), next unclaimed part (16).
uint32_t generation_of(uint64_t ticket) { return static_cast<uint32_t>(ticket >> 32); }
int parts_of(uint64_t ticket) { return static_cast<int>((ticket >> 16) & 0xffffu); }
int next_part_of(uint64_t ticket) { return static_cast<int>(ticket & 0xffffu); }

void pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

WorkerTeam::WorkerTeam(int workers) {
  for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
}

WorkerTeam::~WorkerTeam() {
  stopping_.store(true);
  {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
  }
  wake_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

bool WorkerTeam::claim(uint32_t generation, int& part) {
  uint64_t ticket = ticket_.load(std::memory_order_acquire);
  for (;;) {
    if (generation_of(ticket) != generation || next_part_of(ticket) >= parts_of(ticket)) return false;
    if (ticket_.compare_exchange_weak(ticket, ticket + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
      part = next_part_of(ticket);
      return true;
    }
  }
}

void WorkerTeam::run_part(int part) {
  try {
    (*body_)(part);
  } catch (...) {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    if (!failure_) failure_ = std::current_exception();
  }
  finished_.fetch_add(1, std::memory_order_acq_rel);
}

void WorkerTeam::run(int parts, const std::function<void(int)>& body) {
  if (parts <= 0) return;
  if (threads_.empty() || parts == 1 || parts > kMaxParts) {
    for (int part = 0; part < parts; ++part) body(part);
    return;
  }
  // No part of the last job is left unclaimed (run() waited for all of them), so no worker reads these now.
  body_ = &body;
  failure_ = nullptr;
  finished_.store(0, std::memory_order_relaxed);
  const uint32_t generation = generation_of(ticket_.load(std::memory_order_relaxed)) + 1;
  ticket_.store(static_cast<uint64_t>(generation) << 32 | static_cast<uint64_t>(parts) << 16, std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard<std::mutex> lock(sleep_mutex_); }
    wake_.notify_all();
  }
  int part = 0;
  while (claim(generation, part)) run_part(part);
  while (finished_.load(std::memory_order_acquire) < parts) pause();
  if (failure_) std::rethrow_exception(failure_);
}

void WorkerTeam::work() {
  uint32_t seen = 0;
  for (;;) {
    // Spin for the next job, then sleep until it comes.
    const Clock::time_point spin_until = Clock::now() + kSpinTime;
    uint32_t generation = generation_of(ticket_.load(std::memory_order_acquire));
    while (generation == seen && !stopping_.load(std::memory_order_relaxed) && Clock::now() < spin_until) {
      for (int i = 0; i < 64; ++i) pause();
      generation = generation_of(ticket_.load(std::memory_order_acquire));
    }
    if (generation == seen && !stopping_.load()) {
      std::unique_lock<std::mutex> lock(sleep_mutex_);
      sleeping_.fetch_add(1, std::memory_order_seq_cst);
      wake_.wait(lock, [&] {
        return stopping_.load() || generation_of(ticket_.load(std::memory_order_seq_cst)) != seen;
      });
      sleeping_.fetch_sub(1, std::memory_order_seq_cst);
      generation = generation_of(ticket_.load(std::memory_order_acquire));
    }
    if (stopping_.load()) return;
    seen = generation;
    int part = 0;
    while (claim(generation, part)) run_part(part);
  }
}

}  // namespace seqtrans
