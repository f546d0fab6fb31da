// Tests for LineReader: line endings, odd bytes, long lines, windows, and pipes fed by a slow writer.
#include "batching/line_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "catch.h"
#include "core/error.h"

namespace seqtrans {
namespace {

std::vector<std::string> texts_of(const std::vector<Line>& lines) {
  std::vector<std::string> texts;
  for (const Line& line : lines) texts.push_back(line.text);
  return texts;
}

// All lines of `input`, read from a string stream in windows of `read_ahead`.
std::vector<std::string> read_all(const std::string& input, size_t read_ahead = 2048) {
  std::istringstream stream(input);
  LineReader reader(stream, read_ahead);
  std::vector<std::string> texts;
  size_t next_index = 0;
  for (auto window = reader.read_window(); !window.empty(); window = reader.read_window()) {
    for (const Line& line : window) {
      CHECK(line.index == next_index++);
      texts.push_back(line.text);
    }
  }
  return texts;
}

// False on a write error. No Catch assertions here: writer threads call it, and Catch is not
// thread-safe; they report through their result, read after join().
bool write_all(int fd, const std::string& bytes) {
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t count = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (count <= 0) return false;
    written += static_cast<size_t>(count);
  }
  return true;
}

// A pipe whose write end is fed by a thread, so the test can control when input arrives.
class Pipe {
 public:
  Pipe() { REQUIRE(::pipe(fds_) == 0); }
  ~Pipe() {
    close_write_end();
    ::close(fds_[0]);
  }
  int read_end() const { return fds_[0]; }
  bool write(const std::string& bytes) { return write_all(fds_[1], bytes); }
  void close_write_end() {
    if (fds_[1] >= 0) ::close(fds_[1]);
    fds_[1] = -1;
  }

 private:
  int fds_[2] = {-1, -1};
};

// A stream buffer without a get area, like std::cin's when synced with stdio: in_avail() is always 0.
class UnbufferedInput : public std::streambuf {
 public:
  explicit UnbufferedInput(std::string bytes) : bytes_(std::move(bytes)) {}

 protected:
  int_type underflow() override {
    return next_ < bytes_.size() ? traits_type::to_int_type(bytes_[next_]) : traits_type::eof();
  }
  int_type uflow() override {
    const int_type c = underflow();
    if (c != traits_type::eof()) ++next_;
    return c;
  }

 private:
  std::string bytes_;
  size_t next_ = 0;
};

}  // namespace

TEST_CASE("LineReader splits lines and strips CR of CRLF", "[batching][reader]") {
  CHECK(read_all("a\nb\r\nc\n") == std::vector<std::string>{"a", "b", "c"});
  CHECK(read_all("one\r\ntwo\r\n") == std::vector<std::string>{"one", "two"});
  // Only the CR of the line ending goes; a CR elsewhere stays (the tokenizer treats it as a space).
  CHECK(read_all("x\r\r\ny\rz\n") == std::vector<std::string>{"x\r", "y\rz"});
}

TEST_CASE("LineReader keeps a last line without newline", "[batching][reader]") {
  CHECK(read_all("a\nb") == std::vector<std::string>{"a", "b"});
  CHECK(read_all("a\r") == std::vector<std::string>{"a"});
  CHECK(read_all("only") == std::vector<std::string>{"only"});
  CHECK(read_all("").empty());
}

TEST_CASE("LineReader keeps empty lines", "[batching][reader]") {
  CHECK(read_all("\n") == std::vector<std::string>{""});
  CHECK(read_all("\n\na\n\n") == std::vector<std::string>{"", "", "a", ""});
  CHECK(read_all("\r\n") == std::vector<std::string>{""});
}

TEST_CASE("LineReader keeps NUL and invalid UTF-8 bytes inside lines", "[batching][reader]") {
  const std::string input("a\0b\n\0\n\xff\xfe x\n", 11);
  CHECK(read_all(input) == std::vector<std::string>{std::string("a\0b", 3), std::string("\0", 1), "\xff\xfe x"});
}

TEST_CASE("LineReader drops a byte order mark at the start only", "[batching][reader]") {
  CHECK(read_all("\xEF\xBB\xBFhello\n\xEF\xBB\xBFworld\n") ==
        std::vector<std::string>{"hello", "\xEF\xBB\xBFworld"});
  // A file holding only the mark is an empty file (found by test/fuzz/line_reader_fuzzer); with a line end
  // after it, it is one blank line.
  CHECK(read_all("\xEF\xBB\xBF").empty());
  CHECK(read_all("\xEF\xBB\xBF\n") == std::vector<std::string>{""});
}

TEST_CASE("LineReader windows hold at most read_ahead lines", "[batching][reader]") {
  std::string input;
  for (int k = 0; k < 10; ++k) input += std::to_string(k) + "\n";
  std::istringstream stream(input);
  LineReader reader(stream, 4);
  CHECK(texts_of(reader.read_window()) == std::vector<std::string>{"0", "1", "2", "3"});
  const std::vector<Line> second = reader.read_window();
  CHECK(texts_of(second) == std::vector<std::string>{"4", "5", "6", "7"});
  CHECK(second.front().index == 4);
  CHECK(texts_of(reader.read_window()) == std::vector<std::string>{"8", "9"});
  CHECK(reader.read_window().empty());
  CHECK(reader.read_window().empty());
  CHECK_THROWS_AS(LineReader(stream, 0), Error);
}

TEST_CASE("LineReader reads an unbuffered stream, one line per window", "[batching][reader]") {
  UnbufferedInput input("first\r\nsecond\nthird");
  std::istream stream(&input);
  LineReader reader(stream, 2048);
  CHECK(texts_of(reader.read_window()) == std::vector<std::string>{"first"});
  CHECK(texts_of(reader.read_window()) == std::vector<std::string>{"second"});
  CHECK(texts_of(reader.read_window()) == std::vector<std::string>{"third"});
  CHECK(reader.read_window().empty());
}

TEST_CASE("LineReader reads very long lines", "[batching][reader]") {
  std::string long_line(3 * 1000 * 1000, 'x');
  for (size_t k = 0; k < long_line.size(); k += 7) long_line[k] = ' ';
  CHECK(read_all("short\n" + long_line + "\nend") == std::vector<std::string>{"short", long_line, "end"});

  // Through a pipe, arriving in many reads.
  Pipe pipe;
  bool written = false;
  std::thread writer([&] {
    written = pipe.write("short\n" + long_line + "\r\nend\n");
    pipe.close_write_end();
  });
  LineReader reader(pipe.read_end(), 2048);
  std::vector<std::string> texts;
  for (auto window = reader.read_window(); !window.empty(); window = reader.read_window()) {
    for (const Line& line : window) texts.push_back(line.text);
  }
  writer.join();
  CHECK(written);
  CHECK(texts == std::vector<std::string>{"short", long_line, "end"});
}

TEST_CASE("LineReader reads files and fills whole windows from them", "[batching][reader]") {
  char path[] = "/tmp/seqtrans_line_reader_XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  std::string input;
  for (int k = 0; k < 5000; ++k) input += "line " + std::to_string(k) + "\r\n";
  REQUIRE(write_all(fd, input));
  ::close(fd);

  LineReader reader = LineReader::open(path, 2048);
  std::vector<size_t> window_sizes;
  std::vector<Line> all;
  for (auto window = reader.read_window(); !window.empty(); window = reader.read_window()) {
    window_sizes.push_back(window.size());
    all.insert(all.end(), window.begin(), window.end());
  }
  ::unlink(path);
  CHECK(window_sizes == std::vector<size_t>{2048, 2048, 904});
  REQUIRE(all.size() == 5000);
  CHECK(all[4999].index == 4999);
  CHECK(all[4999].text == "line 4999");
  CHECK_THROWS_AS(LineReader::open("/nonexistent/seqtrans/input.txt", 16), Error);
}

TEST_CASE("LineReader returns a line from a pipe at once, without waiting for more", "[batching][reader]") {
  Pipe pipe;
  std::promise<void> first_window_read;
  std::promise<void> second_window_read;
  std::atomic<bool> writer_finished{false};
  bool written = true;
  std::thread writer([&] {
    // A person typing: one line, then nothing until it has been answered. The timeouts only keep a
    // broken reader from hanging the test; the flag tells whether the reader waited for them.
    written = pipe.write("hello\n") && written;
    first_window_read.get_future().wait_for(std::chrono::seconds(10));
    written = pipe.write("one\ntw") && written;  // a complete line and the start of the next one
    second_window_read.get_future().wait_for(std::chrono::seconds(10));
    writer_finished = true;
    written = pipe.write("o\nthree") && written;
    pipe.close_write_end();
  });

  LineReader reader(pipe.read_end(), 2048);
  const std::vector<Line> first = reader.read_window();
  const bool first_before_writer_finished = !writer_finished;
  first_window_read.set_value();
  std::vector<Line> second = reader.read_window();
  const bool second_before_writer_finished = !writer_finished;
  second_window_read.set_value();
  std::vector<Line> rest;
  for (auto window = reader.read_window(); !window.empty(); window = reader.read_window()) {
    rest.insert(rest.end(), window.begin(), window.end());
  }
  writer.join();

  CHECK(written);
  CHECK(first_before_writer_finished);
  CHECK(texts_of(first) == std::vector<std::string>{"hello"});
  CHECK(second_before_writer_finished);
  CHECK(texts_of(second) == std::vector<std::string>{"one"});
  CHECK(texts_of(rest) == std::vector<std::string>{"two", "three"});
  REQUIRE(rest.size() == 2);
  CHECK(rest[0].index == 2);
  CHECK(rest[1].index == 3);
}

TEST_CASE("LineReader waits for the first line to be complete", "[batching][reader]") {
  Pipe pipe;
  bool written = true;
  std::thread writer([&] {
    written = pipe.write("hel");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    written = pipe.write("lo\n") && written;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    pipe.close_write_end();
  });
  LineReader reader(pipe.read_end(), 2048);
  CHECK(texts_of(reader.read_window()) == std::vector<std::string>{"hello"});
  CHECK(reader.read_window().empty());
  writer.join();
  CHECK(written);
}

}  // namespace seqtrans
