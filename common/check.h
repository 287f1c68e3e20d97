// Invariant checks: for programming errors, never for bad input (that is Result's job).
//
//   DLTUNE_CHECK(cond, "message")         aborts with file:line, the condition and message
//   DLTUNE_CHECK_EQ(a, b)                 aborts printing both values when a != b
//   (also _NE, _LT, _LE, _GT, _GE)
#pragma once

#include <sstream>
#include <string>

namespace dltune::detail {

// Prints "dltune: internal error at file:line: what" to stderr and aborts. Never returns.
[[noreturn]] void check_failed(const char* file, int line, const std::string& what);

template <typename A, typename B>
[[noreturn]] void check_op_failed(const char* file, int line, const char* expr, const A& a,
                                  const B& b) {
  std::ostringstream os;
  os << "check failed: " << expr << " (" << a << " vs " << b << ")";
  check_failed(file, line, os.str());
}

}  // namespace dltune::detail

#define DLTUNE_CHECK(cond, ...)                                                                   \
  do {                                                                                            \
    if (!(cond)) [[unlikely]]                                                                     \
      ::dltune::detail::check_failed(                                                             \
          __FILE__, __LINE__, std::string("check failed: " #cond " ") __VA_OPT__(+) __VA_ARGS__); \
  } while (0)

#define DLTUNE_CHECK_OP_(a, b, op)                                                        \
  do {                                                                                    \
    const auto& dltune_a_ = (a);                                                          \
    const auto& dltune_b_ = (b);                                                          \
    if (!(dltune_a_ op dltune_b_)) [[unlikely]]                                           \
      ::dltune::detail::check_op_failed(__FILE__, __LINE__, #a " " #op " " #b, dltune_a_, \
                                        dltune_b_);                                       \
  } while (0)

#define DLTUNE_CHECK_EQ(a, b) DLTUNE_CHECK_OP_(a, b, ==)
#define DLTUNE_CHECK_NE(a, b) DLTUNE_CHECK_OP_(a, b, !=)
#define DLTUNE_CHECK_LT(a, b) DLTUNE_CHECK_OP_(a, b, <)
#define DLTUNE_CHECK_LE(a, b) DLTUNE_CHECK_OP_(a, b, <=)
#define DLTUNE_CHECK_GT(a, b) DLTUNE_CHECK_OP_(a, b, >)
#define DLTUNE_CHECK_GE(a, b) DLTUNE_CHECK_OP_(a, b, >=)
