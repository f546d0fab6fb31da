#include "descriptor_stream.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace seqtrans::app {

FileDescriptor::~FileDescriptor() { close(); }

int FileDescriptor::close() {
  if (fd_ < 0) return 0;
  const int result = ::close(fd_);
  fd_ = -1;
  return result;
}

DescriptorBuffer::DescriptorBuffer(int fd, std::string name) : fd_(fd), name_(std::move(name)), buffer_(1 << 16) {
  setp(buffer_.data(), buffer_.data() + buffer_.size());
}

DescriptorBuffer::int_type DescriptorBuffer::overflow(int_type c) {
  write_pending();
  if (!traits_type::eq_int_type(c, traits_type::eof())) {
    *pptr() = traits_type::to_char_type(c);
    pbump(1);
  }
  return traits_type::not_eof(c);
}

int DescriptorBuffer::sync() {
  write_pending();
  return 0;
}

// write() may take less than asked (pipes, FIFOs, signals), so loop until all is written or it fails.
void DescriptorBuffer::write_pending() {
  const char* data = pbase();
  size_t size = static_cast<size_t>(pptr() - pbase());
  while (size > 0) {
    const ssize_t written = ::write(fd_, data, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      const int error = written < 0 ? errno : EIO;
      setp(buffer_.data(), buffer_.data() + buffer_.size());  // drop what cannot be written
      throw Error(fmt::format("cannot write output '{}': {}", name_, std::strerror(error)));
    }
    data += written;
    size -= static_cast<size_t>(written);
  }
  setp(buffer_.data(), buffer_.data() + buffer_.size());
}

DescriptorStream::DescriptorStream(int fd, const std::string& name)
    : name_(name), fd_(fd), buffer_(fd, name), stream_(&buffer_) {
  stream_.exceptions(std::ios::badbit);
}

void DescriptorStream::close() {
  flush();
  SEQTRANS_CHECK(fd_.close() == 0, "cannot write output '{}': {}", name_, std::strerror(errno));
}

}  // namespace seqtrans::app
