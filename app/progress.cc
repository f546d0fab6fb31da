#include "progress.h"

#include <cstdio>
#include <fstream>

namespace seqtrans::app {

ProgressBar::ProgressBar(bool enabled, size_t total_lines, std::string label)
    : enabled_(enabled),
      total_(total_lines),
      label_(std::move(label)),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void ProgressBar::advance(size_t lines) {
  done_ += lines;
  const auto now = std::chrono::steady_clock::now();
  // Redraw at most 10 times a second: the bar must not cost throughput.
  if (enabled_ && now - last_draw_ > std::chrono::milliseconds(100)) {
    last_draw_ = now;
    draw(false);
  }
}

void ProgressBar::finish() {
  if (enabled_) draw(true);
}

void ProgressBar::draw(bool final_draw) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = seconds > 0 ? done_ / seconds : 0.0;
  const double fraction = total_ ? static_cast<double>(done_) / total_ : 0.0;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(fraction * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  const double eta = rate > 0 && total_ > done_ ? (total_ - done_) / rate : 0.0;
  std::fprintf(stderr, "\r%s [%s] %zu/%zu lines  %.1f lines/s  ETA %.0fs   ", label_.c_str(), bar.c_str(), done_,
               total_, rate, eta);
  if (final_draw) std::fputc('\n', stderr);
  std::fflush(stderr);
}

size_t count_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  size_t lines = 0;
  char buffer[1 << 16];
  char last = '\n';
  while (in.read(buffer, sizeof(buffer)) || in.gcount() > 0) {
    const std::streamsize got = in.gcount();
    for (std::streamsize i = 0; i < got; ++i)
      if (buffer[i] == '\n') ++lines;
    last = buffer[got - 1];
  }
  return lines + (last != '\n' ? 1 : 0);
}

}  // namespace seqtrans::app
