#include "engine/core/precision.h"

namespace dltune::engine {
namespace {

// The loops below are plain integer arithmetic that GCC vectorises; the x86-64-v3 clone does
// it 8 floats at a time. Both give bf16_round's bits.
#define DLTUNE_MULTIVERSION __attribute__((target_clones("arch=x86-64-v3", "default")))

DLTUNE_MULTIVERSION
void round_loop(const float* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_round(src[i]);
}

DLTUNE_MULTIVERSION
void pack_loop(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_bits(src[i]);
}

}  // namespace

const char* precision_name(Precision p) { return p == Precision::kBf16 ? "bf16" : "fp32"; }

bool parse_precision(const std::string& text, Precision* out) {
  if (text == "fp32") {
    *out = Precision::kFp32;
    return true;
  }
  if (text == "bf16") {
    *out = Precision::kBf16;
    return true;
  }
  return false;
}

void bf16_round_array(const float* src, float* dst, int64_t n) { round_loop(src, dst, n); }

void bf16_pack_array(const float* src, uint16_t* dst, int64_t n) { pack_loop(src, dst, n); }

void bf16_unpack_array(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(src[i]);
}

}  // namespace dltune::engine
