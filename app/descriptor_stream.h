// A file descriptor written through a std::ostream, with write errors reported by name and errno.
#pragma once

#include <ostream>
#include <streambuf>
#include <string>
#include <vector>

namespace seqtrans::app {

// Owns one open file descriptor and closes it once.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor();
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;

  int get() const { return fd_; }
  // Closes now and returns close()'s result, so a caller can report a late write error (NFS, quotas).
  int close();

 private:
  int fd_;
};

// Buffers output for a descriptor. A failed write throws seqtrans::Error naming `name` and the errno
// (e.g. "No space left on device"); std::ostream passes it on because DescriptorStream sets badbit
// in its exception mask.
class DescriptorBuffer : public std::streambuf {
 public:
  DescriptorBuffer(int fd, std::string name);

 protected:
  int_type overflow(int_type c) override;
  int sync() override;

 private:
  void write_pending();

  int fd_;
  std::string name_;
  std::vector<char> buffer_;
};

// The pieces above put together: an ostream over a descriptor it owns.
class DescriptorStream {
 public:
  DescriptorStream(int fd, const std::string& name);

  std::ostream& stream() { return stream_; }
  int fd() const { return fd_.get(); }
  // Writes out everything buffered; throws seqtrans::Error on a write error.
  void flush() { stream_.flush(); }
  // Flushes, then closes; throws seqtrans::Error if either fails.
  void close();

 private:
  std::string name_;
  FileDescriptor fd_;
  DescriptorBuffer buffer_;
  std::ostream stream_;
};

}  // namespace seqtrans::app
