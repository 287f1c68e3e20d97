// What a fuzz target asserts beyond "no crash": a property that must hold for every input
// (a round trip gives back what went in). A failure aborts, which libFuzzer reports as a crash
// and the corpus replay test as a failure.
#pragma once

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)
