// The engine's compute precision (training.precision) and bf16 rounding.
//
// fp32: every op in float32.
// bf16: PyTorch's CPU autocast (torch.cpu.amp.autocast(dtype=torch.bfloat16)) as the engine
//   runs it, with fp32 master weights (the optimizer, checkpoints and the flat parameter buffer
//   stay float32):
//     in bf16:  convolution, linear, and attention's two products (Q K^T and P V, and their
//               backward products): their inputs (activation and weight) are rounded to bf16,
//               the products accumulate in fp32, and their outputs are rounded to bf16 (as
//               autocast returns a bf16 tensor);
//     in fp32:  batch and layer norm, softmax (attention's and the loss's), the loss, pooling,
//               element-wise ops, embeddings, the optimizer and gradient clipping; they read
//               the bf16-rounded outputs of the ops before them exactly.
//   Gradients flowing into a bf16 op's backward are rounded to bf16 (autocast's backward runs
//   the bf16 kernels on bf16 gradients); parameter gradients accumulate and are kept in fp32.
//   Where the CPU has AVX512-BF16 or AMX (engine/core/cpu_features.h) the bf16 products may run
//   on oneDNN's bf16 primitives; elsewhere (this project's AMD Zen 3 machine: AVX2 + FMA only)
//   they run the documented fallback: the same bf16-rounded inputs multiplied and added in fp32
//   FMAs, which is what the bf16 dot-product instructions compute up to the order of the adds.
//   Values are held in float buffers whose low 16 bits are zero: the engine's activation
//   buffers stay 4 bytes per element (engine/graph/memory_model.h states each op's saved bytes).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace dltune::engine {

enum class Precision { kFp32, kBf16 };

// "fp32" / "bf16".
const char* precision_name(Precision p);
// Parses "fp32" / "bf16"; false for anything else.
bool parse_precision(const std::string& text, Precision* out);

// x rounded to the nearest bf16 (ties to even), as a float; NaN stays NaN.
inline float bf16_round(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0) {
    u |= 0x00400000u;  // quiet NaN; the payload's high bits survive the truncation
  } else {
    u += 0x7FFFu + ((u >> 16) & 1u);
  }
  u &= 0xFFFF0000u;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// The upper 16 bits of bf16_round(x): the bf16 value's bits.
inline uint16_t bf16_bits(float x) {
  const float r = bf16_round(x);
  uint32_t u;
  std::memcpy(&u, &r, sizeof u);
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16_to_float(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// dst[i] = bf16_round(src[i]) for i < n (dst may be src): vectorised (AVX2 build where the CPU
// has it; the same bits as bf16_round in every build).
void bf16_round_array(const float* src, float* dst, int64_t n);
// dst[i] = bf16_bits(src[i]).
void bf16_pack_array(const float* src, uint16_t* dst, int64_t n);
// dst[i] = bf16_to_float(src[i]).
void bf16_unpack_array(const uint16_t* src, float* dst, int64_t n);

}  // namespace dltune::engine
