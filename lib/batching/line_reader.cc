#include "batching/line_reader.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <istream>

#include "core/error.h"

namespace seqtrans {

// Where the reader's bytes come from.
class ByteSource {
 public:
  enum class Wait { Block, NoWait };
  enum class ReadResult { Data, NothingReady, End };

  virtual ~ByteSource() = default;
  // Appends up to `max_bytes` bytes to `buffer`. Wait::Block waits for at least one byte or the end of
  // input; Wait::NoWait returns NothingReady instead of waiting.
  virtual ReadResult read(std::string& buffer, size_t max_bytes, Wait wait) = 0;
};

namespace {

constexpr size_t read_chunk_bytes = 64 * 1024;
constexpr std::string_view byte_order_mark = "\xEF\xBB\xBF";

// A file descriptor read with poll() + read(): poll tells whether a read would block, so the descriptor
// can stay in blocking mode (it is often the terminal or pipe the user's shell shares).
class FdSource : public ByteSource {
 public:
  FdSource(int fd, bool owned) : fd_(fd), owned_(owned) {}
  ~FdSource() override {
    if (owned_) ::close(fd_);
  }
  FdSource(const FdSource&) = delete;
  FdSource& operator=(const FdSource&) = delete;

  ReadResult read(std::string& buffer, size_t max_bytes, Wait wait) override {
    while (true) {
      pollfd request{fd_, POLLIN, 0};
      const int ready = ::poll(&request, 1, wait == Wait::Block ? -1 : 0);
      if (ready < 0 && errno == EINTR) continue;
      SEQTRANS_CHECK(ready >= 0, "line reader: cannot poll the input: {}", std::strerror(errno));
      SEQTRANS_CHECK(!(request.revents & POLLNVAL), "line reader: input descriptor {} is not open", fd_);
      if (ready == 0) return ReadResult::NothingReady;

      const size_t old_size = buffer.size();
      buffer.resize(old_size + max_bytes);
      const ssize_t count = ::read(fd_, &buffer[old_size], max_bytes);
      const int read_errno = errno;
      buffer.resize(old_size + std::max<ssize_t>(count, 0));
      if (count > 0) return ReadResult::Data;
      if (count == 0) return ReadResult::End;
      if (read_errno == EINTR) continue;
      // Someone else may have made the descriptor non-blocking; poll again (or report nothing ready).
      if (read_errno == EAGAIN || read_errno == EWOULDBLOCK) {
        if (wait == Wait::NoWait) return ReadResult::NothingReady;
        continue;
      }
      throw Error(fmt::format("line reader: cannot read the input: {}", std::strerror(read_errno)));
    }
  }

 private:
  int fd_;
  bool owned_;
};

// A std::istream: "ready" means already in the stream buffer (in_avail), the best a stream can tell.
class StreamSource : public ByteSource {
 public:
  explicit StreamSource(std::istream& stream) : stream_(stream) {}

  ReadResult read(std::string& buffer, size_t max_bytes, Wait wait) override {
    std::streambuf* bytes = stream_.rdbuf();
    SEQTRANS_CHECK(bytes != nullptr, "line reader: the input stream has no buffer");
    size_t count = 0;
    if (wait == Wait::Block) {
      if (bytes->sgetc() == std::char_traits<char>::eof()) return ReadResult::End;
      // An unbuffered stream (std::cin synced with stdio) reports nothing available even now.
      count = static_cast<size_t>(std::max<std::streamsize>(bytes->in_avail(), 1));
    } else {
      const std::streamsize available = bytes->in_avail();
      if (available < 0) return ReadResult::End;
      if (available == 0) return ReadResult::NothingReady;
      count = static_cast<size_t>(available);
    }
    count = std::min(count, max_bytes);
    const size_t old_size = buffer.size();
    buffer.resize(old_size + count);
    const std::streamsize got = bytes->sgetn(&buffer[old_size], static_cast<std::streamsize>(count));
    buffer.resize(old_size + static_cast<size_t>(std::max<std::streamsize>(got, 0)));
    return got > 0 ? ReadResult::Data : ReadResult::End;
  }

 private:
  std::istream& stream_;
};

}  // namespace

using Wait = ByteSource::Wait;
using ReadResult = ByteSource::ReadResult;

LineReader::LineReader(std::unique_ptr<ByteSource> source, size_t read_ahead)
    : source_(std::move(source)), read_ahead_(read_ahead) {
  SEQTRANS_CHECK(read_ahead_ > 0, "line reader: read_ahead must be at least 1");
}

LineReader::LineReader(int fd, size_t read_ahead)
    : LineReader(std::make_unique<FdSource>(fd, /*owned=*/false), read_ahead) {}

LineReader::LineReader(std::istream& stream, size_t read_ahead)
    : LineReader(std::make_unique<StreamSource>(stream), read_ahead) {}

LineReader LineReader::open(const std::string& path, size_t read_ahead) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  SEQTRANS_CHECK(fd >= 0, "line reader: cannot open {}: {}", path, std::strerror(errno));
  return LineReader(std::make_unique<FdSource>(fd, /*owned=*/true), read_ahead);
}

LineReader::~LineReader() = default;
LineReader::LineReader(LineReader&&) noexcept = default;
LineReader& LineReader::operator=(LineReader&&) noexcept = default;

std::vector<Line> LineReader::read_window() {
  std::vector<Line> window;
  while (window.size() < read_ahead_) {
    if (take_complete_line(window)) continue;
    if (at_end_) {
      // The last line needs no '\n', but input holding only a byte order mark is empty, not a blank line.
      const size_t rest = buffer_.size() - buffer_start_;
      const bool only_mark = next_index_ == 0 && buffer_.compare(buffer_start_, rest, byte_order_mark) == 0;
      if (rest > 0 && !only_mark) take_line(window, rest, 0);
      break;
    }
    // Drop consumed bytes once they are at least half the buffer: amortized linear copying.
    if (buffer_start_ > 0 && 2 * buffer_start_ >= buffer_.size()) {
      buffer_.erase(0, buffer_start_);
      buffer_start_ = 0;
    }
    const Wait wait = window.empty() ? Wait::Block : Wait::NoWait;
    const ReadResult result = source_->read(buffer_, read_chunk_bytes, wait);
    if (result == ReadResult::NothingReady) break;
    if (result == ReadResult::End) at_end_ = true;
  }
  return window;
}

bool LineReader::take_complete_line(std::vector<Line>& window) {
  const size_t search_from = buffer_start_ + scanned_;
  const size_t newline = buffer_.find('\n', search_from);
  if (newline == std::string::npos) {
    scanned_ = buffer_.size() - buffer_start_;
    return false;
  }
  take_line(window, newline - buffer_start_, 1);
  return true;
}

void LineReader::take_line(std::vector<Line>& window, size_t length, size_t ending_length) {
  std::string text = buffer_.substr(buffer_start_, length);
  buffer_start_ += length + ending_length;
  scanned_ = 0;
  if (!text.empty() && text.back() == '\r') text.pop_back();
  if (next_index_ == 0 && text.compare(0, byte_order_mark.size(), byte_order_mark) == 0) {
    text.erase(0, byte_order_mark.size());
  }
  window.push_back(Line{next_index_++, std::move(text)});
}

}  // namespace seqtrans
