// LineReader: reads input lines in windows that end early when no more input is ready.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace seqtrans {

// One input line without its line ending, and its 0-based position in the whole input.
struct Line {
  size_t index = 0;
  std::string text;
};

class ByteSource;

// Reads lines in windows of up to read_ahead lines. A window blocks only for its first line, then adds
// lines only while more input is already there, so a person typing into a pipe gets each line
// translated at once while a file or a fast pipe still fills whole windows.
// Lines end at '\n'; one '\r' before it is dropped (CRLF input); a last line without '\n' still counts;
// a UTF-8 byte order mark at the very start is dropped. Bytes are otherwise kept as they are (NUL and
// invalid UTF-8 included: the tokenizer deals with them), and a line may be arbitrarily long.
class LineReader {
 public:
  // Reads from `fd`, which stays the caller's (e.g. STDIN_FILENO); the reader never changes its flags.
  LineReader(int fd, size_t read_ahead);
  // Reads from `stream`, which must outlive the reader. A stream cannot be polled, so after the first
  // line a window only takes what the stream has already buffered.
  LineReader(std::istream& stream, size_t read_ahead);
  // Reads the file at `path`; throws seqtrans::Error when it cannot be opened.
  static LineReader open(const std::string& path, size_t read_ahead);

  ~LineReader();
  LineReader(LineReader&&) noexcept;
  LineReader& operator=(LineReader&&) noexcept;

  // The next window, lines in input order; empty once the input has ended. Throws seqtrans::Error on a
  // read error.
  std::vector<Line> read_window();

 private:
  LineReader(std::unique_ptr<ByteSource> source, size_t read_ahead);

  // Moves the next complete line of the buffer into `window`; false when the buffer holds none.
  bool take_complete_line(std::vector<Line>& window);
  void take_line(std::vector<Line>& window, size_t length, size_t ending_length);

  std::unique_ptr<ByteSource> source_;
  size_t read_ahead_;
  std::string buffer_;       // bytes read but not yet returned, from buffer_start_ on
  size_t buffer_start_ = 0;
  size_t scanned_ = 0;       // bytes after buffer_start_ already known to hold no '\n'
  size_t next_index_ = 0;
  bool at_end_ = false;
};

}  // namespace seqtrans
