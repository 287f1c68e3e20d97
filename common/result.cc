#include "common/result.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dltune {

int Error::exit_code() const {
  switch (kind_) {
    case ErrorKind::kInvalidInput:
    case ErrorKind::kNotFound:
    case ErrorKind::kUnsupported:
      return 2;
    case ErrorKind::kIo:
    case ErrorKind::kTimeout:
    case ErrorKind::kPeerFailed:
    case ErrorKind::kInternal:
      return 1;
  }
  return 1;
}

Error errno_error(const std::string& what) {
  const int e = errno;
  return io_error(what + ": " + std::strerror(e));
}

namespace detail {
void check_failed(const char* file, int line, const std::string& what) {
  std::fprintf(stderr, "dltune: internal error at %s:%d: %s\n", file, line, what.c_str());
  std::fflush(stderr);
  std::abort();
}
}  // namespace detail

}  // namespace dltune
