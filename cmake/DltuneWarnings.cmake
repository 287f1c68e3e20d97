# Warning and sanitizer flags, applied to every target of ours through dltune_target().
add_library(dltune_build_flags INTERFACE)
target_compile_options(dltune_build_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
  -Wcast-align -Wunused -Woverloaded-virtual -Wimplicit-fallthrough>)
if(DLTUNE_WERROR)
  target_compile_options(dltune_build_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX,C>:-Werror>)
endif()
# DLTUNE_SANITIZE_OPT: the optimisation level of a sanitized build and of a fuzz build. 1 (the
# default) is the sanitizers' recommended level, and a third faster to build than -O2 under them
# (recipes/plan_json.cc: 40 s at -O2, 26 s at -O1). 0 builds fastest, CI's unit-test build
# (six of the heaviest sources: 153 s at -O1, 95 s at -O0). Sources that ask for -O3 (the
# engine's kernels, comm's reductions) keep it, so the numerics tests stay quick at 0.
set(DLTUNE_SANITIZE_OPT 1 CACHE STRING "Optimisation level of a DLTUNE_SANITIZE build: 0 or 1")
if(NOT DLTUNE_SANITIZE_OPT MATCHES "^[01]$")
  message(FATAL_ERROR "DLTUNE_SANITIZE_OPT must be 0 or 1, got '${DLTUNE_SANITIZE_OPT}'")
endif()
# DLTUNE_SANITIZE_UB: which of UBSan's checks a sanitized build makes. "all" (the default) is
# -fsanitize=undefined. "lean", CI's unit-test build, leaves out the pointer checks that
# instrument every dereference: null, alignment, nonnull-attribute, returns-nonnull-attribute,
# object-size, pointer-overflow. They are most of UBSan's compile time (engine/worker/trial.cc
# at -O0: 28-31 s with all, 17 s lean, 16.5 s with ASan alone), and what they catch ASan or
# the fault itself mostly reports: a null dereference faults, x86 loads misaligned data. Lean
# keeps the arithmetic and control checks (signed overflow, shifts, bounds, float casts,
# division by zero, unreachable, missing return, bool and enum loads, vptr).
set(DLTUNE_SANITIZE_UB "all" CACHE STRING "UBSan checks of a DLTUNE_SANITIZE build: all or lean")
if(NOT DLTUNE_SANITIZE_UB MATCHES "^(all|lean)$")
  message(FATAL_ERROR "DLTUNE_SANITIZE_UB must be all or lean, got '${DLTUNE_SANITIZE_UB}'")
endif()
if(DLTUNE_SANITIZE)
  target_compile_options(dltune_build_flags INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
    $<$<COMPILE_LANGUAGE:CXX,C>:-O${DLTUNE_SANITIZE_OPT}>)
  if(DLTUNE_SANITIZE_UB STREQUAL "lean")
    target_compile_options(dltune_build_flags INTERFACE
      -fno-sanitize=null,alignment,nonnull-attribute,returns-nonnull-attribute,object-size,pointer-overflow)
  endif()
  target_link_options(dltune_build_flags INTERFACE -fsanitize=address,undefined)
endif()
if(DLTUNE_FUZZ)
  # Every library a fuzz target links is instrumented for coverage and checked by ASan/UBSan.
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "DLTUNE_FUZZ=ON needs clang: configure with CC=clang CXX=clang++")
  endif()
  # At DLTUNE_SANITIZE_OPT (1) rather than the build type's -O2, as libFuzzer's documentation
  # builds its examples: CI builds the fuzzers from scratch on every run.
  target_compile_options(dltune_build_flags INTERFACE
    -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
    -fno-sanitize-recover=undefined $<$<COMPILE_LANGUAGE:CXX,C>:-O${DLTUNE_SANITIZE_OPT}>)
  # Instrumented code calls libFuzzer's hooks: every program of a fuzz build links them (without
  # libFuzzer's main); the fuzz targets add libFuzzer itself.
  target_link_options(dltune_build_flags INTERFACE -fsanitize=fuzzer-no-link,address,undefined)
endif()
# DLTUNE_TEST_OPT=0|1|2: the optimisation level of the test programs' own sources (dltune_test);
# empty (the default) keeps the build's. The product's libraries they link keep theirs, so what
# a test measures and how fast it runs barely change, while the test sources (a quarter of the
# suite's compile time: gtest's and nlohmann/json's templates) compile in 63 % of the time at 0
# (the 122 test objects: 637 CPU-seconds against 1,006 at -O2). CI's suite build uses 0.
set(DLTUNE_TEST_OPT "" CACHE STRING "Optimisation level of the test programs' sources: empty, 0, 1 or 2")
if(NOT DLTUNE_TEST_OPT MATCHES "^[012]?$")
  message(FATAL_ERROR "DLTUNE_TEST_OPT must be empty, 0, 1 or 2, got '${DLTUNE_TEST_OPT}'")
endif()
# DLTUNE_DEBUG_INFO=0|1|2: the debug information of a RelWithDebInfo (or any) build. Empty (the
# default) keeps the build type's; 1 is line tables only (what sanitizer reports and backtraces
# need), 0 none. Debug information is most of the compile time of the template-heavy files
# (recipes/plan_json.cc: 55 s at -g, 35 s at -g1, 25 s at -g0), so CI builds with less.
set(DLTUNE_DEBUG_INFO "" CACHE STRING "Debug information level: empty (the build type's), 0, 1 or 2")
if(NOT DLTUNE_DEBUG_INFO STREQUAL "")
  if(NOT DLTUNE_DEBUG_INFO MATCHES "^[012]$")
    message(FATAL_ERROR "DLTUNE_DEBUG_INFO must be empty, 0, 1 or 2, got '${DLTUNE_DEBUG_INFO}'")
  endif()
  # C and C++ only: nvcc has no -g0/-g1 (its host code keeps the build type's flags).
  target_compile_options(dltune_build_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX,C>:-g${DLTUNE_DEBUG_INFO}>)
endif()
target_include_directories(dltune_build_flags INTERFACE
  ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/generated)

# dltune_library(name SOURCES ... DEPS ...): a module library with our flags.
function(dltune_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_link_libraries(${name} PUBLIC dltune_build_flags ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
endfunction()

# dltune_test(name SOURCES ... DEPS ... [LABELS ...] [TIMEOUT s]): one gtest executable,
# registered as one ctest test (so a run shows one line per test program).
function(dltune_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE dltune_build_flags ${ARG_DEPS} GTest::gtest_main)
  if(NOT DLTUNE_TEST_OPT STREQUAL "")
    # After the build type's -O, so it counts (in a sanitized build DLTUNE_SANITIZE_OPT's comes
    # later still, from dltune_build_flags, and wins).
    target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX,C>:-O${DLTUNE_TEST_OPT}>)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS "${ARG_LABELS}"
    ENVIRONMENT "DLTUNE_SOURCE_DIR=${CMAKE_SOURCE_DIR};DLTUNE_BINARY_DIR=${CMAKE_BINARY_DIR}")
  if("unit" IN_LIST ARG_LABELS)
    add_dependencies(dltune_unit_tests ${name})
  endif()
endfunction()
