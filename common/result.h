// Result<T> and Error: how expected failures travel up through dltune.
//
// A function that can fail on bad input, a missing device, an unreachable peer or a timeout
// returns Result<T> (a small subset of C++23 std::expected). Each layer adds context on the
// way up with Error::wrap(), so the user finally sees one sentence that says what, where and
// what to do:
//
//   auto topo = topology::load_xml(path);
//   if (!topo) return topo.error().wrap("loading topology '" + path + "'");
//
// Broken invariants are not Errors: use DLTUNE_CHECK (common/check.h).
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "common/check.h"

namespace dltune {

// What kind of failure, which decides the exit code at the CLI boundary (DESIGN.md:
// 2 for bad usage or bad input, 1 for a job or command that failed).
enum class ErrorKind {
  kInvalidInput,  // bad recipe, topology file, bundle, command line: exit 2
  kNotFound,      // a named file / plan / peer does not exist: exit 2
  kUnsupported,   // valid request this build or machine cannot serve: exit 2
  kIo,            // a system call failed: exit 1
  kTimeout,       // a peer or trial did not answer in time: exit 1
  kPeerFailed,    // a rank or remote process died: exit 1
  kInternal,      // a library we call failed unexpectedly: exit 1
};

class [[nodiscard]] Error {
 public:
  Error(ErrorKind kind, std::string message) : kind_(kind), message_(std::move(message)) {}

  ErrorKind kind() const { return kind_; }
  // The whole message, outermost context first: "loading topology 'x.xml': line 3: ...".
  const std::string& message() const { return message_; }

  // Returns this error with `context` prepended ("context: message"); the kind is kept.
  Error wrap(const std::string& context) const& { return Error(kind_, context + ": " + message_); }
  Error wrap(const std::string& context) && {
    message_.insert(0, context + ": ");
    return std::move(*this);
  }

  // The process exit code DESIGN.md assigns to this kind of failure (1 or 2).
  int exit_code() const;

 private:
  ErrorKind kind_;
  std::string message_;
};

// Shorthands for the common kinds.
inline Error invalid_input(std::string m) { return {ErrorKind::kInvalidInput, std::move(m)}; }
inline Error not_found(std::string m) { return {ErrorKind::kNotFound, std::move(m)}; }
inline Error unsupported(std::string m) { return {ErrorKind::kUnsupported, std::move(m)}; }
inline Error io_error(std::string m) { return {ErrorKind::kIo, std::move(m)}; }
inline Error timeout_error(std::string m) { return {ErrorKind::kTimeout, std::move(m)}; }
inline Error peer_failed(std::string m) { return {ErrorKind::kPeerFailed, std::move(m)}; }
inline Error internal_error(std::string m) { return {ErrorKind::kInternal, std::move(m)}; }
// An io_error whose message ends with strerror(errno) of the current errno.
Error errno_error(const std::string& what);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // Precondition: ok(). Violations abort with a message (a programming error, not input).
  T& value() & {
    DLTUNE_CHECK(ok(), "value() on an error Result: " + std::get<1>(v_).message());
    return std::get<0>(v_);
  }
  const T& value() const& {
    DLTUNE_CHECK(ok(), "value() on an error Result: " + std::get<1>(v_).message());
    return std::get<0>(v_);
  }
  T&& value() && {
    DLTUNE_CHECK(ok(), "value() on an error Result: " + std::get<1>(v_).message());
    return std::get<0>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // Precondition: !ok().
  const Error& error() const& {
    DLTUNE_CHECK(!ok(), "error() on a successful Result");
    return std::get<1>(v_);
  }
  Error&& error() && {
    DLTUNE_CHECK(!ok(), "error() on a successful Result");
    return std::get<1>(std::move(v_));
  }

  T value_or(T fallback) const& { return ok() ? std::get<0>(v_) : std::move(fallback); }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success carries nothing.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit by design

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const& {
    DLTUNE_CHECK(!ok_, "error() on a successful Result");
    return error_;
  }
  Error&& error() && {
    DLTUNE_CHECK(!ok_, "error() on a successful Result");
    return std::move(error_);
  }

 private:
  Error error_{ErrorKind::kInternal, ""};
  bool ok_ = true;
};

using Status = Result<void>;
inline Status ok_status() { return {}; }

}  // namespace dltune

// Evaluates `expr` (a Result or Status); on error returns it from the enclosing function,
// wrapped with `context` (a std::string expression, evaluated only on failure).
#define DLTUNE_TRY_CTX(expr, context)                                               \
  do {                                                                              \
    auto&& dltune_try_r_ = (expr);                                                  \
    if (!dltune_try_r_.ok()) return std::move(dltune_try_r_).error().wrap(context); \
  } while (0)

// Evaluates `expr`; on error returns the error unchanged.
#define DLTUNE_TRY(expr)                                              \
  do {                                                                \
    auto&& dltune_try_r_ = (expr);                                    \
    if (!dltune_try_r_.ok()) return std::move(dltune_try_r_).error(); \
  } while (0)
