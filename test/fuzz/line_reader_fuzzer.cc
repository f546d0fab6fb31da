// libFuzzer target: LineReader on any input, delivered in reads of random sizes that sometimes find
// nothing ready (as a pipe fed in bursts does), with a random read-ahead. The lines must be exactly those
// of a plain split of the whole input, numbered in order, in windows of at most read-ahead lines.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <istream>
#include <random>
#include <streambuf>
#include <string>
#include <vector>

#include "batching/line_reader.h"
#include "fuzz/fuzz_check.h"

namespace {

using seqtrans::fuzz::require;

// Hands out `bytes` in pieces of random size; between pieces, in_avail() may say nothing is ready yet.
class BurstyInput : public std::streambuf {
 public:
  BurstyInput(std::string bytes, uint32_t seed) : bytes_(std::move(bytes)), random_(seed) {}

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    if (next_ >= bytes_.size()) return traits_type::eof();
    // Mostly short reads, now and then a long one, so lines both straddle and fill the reader's buffer.
    const size_t limit = random_() % 8 == 0 ? 4096 : 16;
    const size_t count = std::min<size_t>(1 + random_() % limit, bytes_.size() - next_);
    char* begin = &bytes_[next_];
    setg(begin, begin, begin + count);
    next_ += count;
    return traits_type::to_int_type(*gptr());
  }
  // Called when the current piece is used up: the next one is "not there yet" half of the time.
  std::streamsize showmanyc() override {
    if (next_ >= bytes_.size()) return -1;
    if (random_() % 2 == 0) return 0;
    underflow();
    return egptr() - gptr();
  }

 private:
  std::string bytes_;
  std::minstd_rand random_;
  size_t next_ = 0;
};

// The reference: split at '\n', drop one '\r' before it, keep a last line without '\n', drop a byte
// order mark at the very start.
std::vector<std::string> plain_split(std::string input) {
  if (input.compare(0, 3, "\xEF\xBB\xBF") == 0) input.erase(0, 3);
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < input.size()) {
    const size_t end = std::min(input.find('\n', start), input.size());
    std::string line = input.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider provider(data, size);
  const size_t read_ahead = provider.ConsumeIntegralInRange<size_t>(1, 8);
  const uint32_t seed = provider.ConsumeIntegral<uint32_t>();
  const std::string input = provider.ConsumeRemainingBytesAsString();

  BurstyInput buffer(input, seed);
  std::istream stream(&buffer);
  seqtrans::LineReader reader(stream, read_ahead);
  std::vector<std::string> lines;
  for (auto window = reader.read_window(); !window.empty(); window = reader.read_window()) {
    require(window.size() <= read_ahead, "a window holds more lines than the read-ahead");
    for (const seqtrans::Line& line : window) {
      require(line.index == lines.size(), "line numbers are not consecutive");
      lines.push_back(line.text);
    }
  }
  require(reader.read_window().empty(), "a line came after the end of the input");
  require(lines == plain_split(input), "the lines differ from a plain split of the input");
  return 0;
}
