#include "engine/core/cpu_features.h"

#include <sstream>

#include <cpuid.h>

#include "common/env.h"
#include "common/log.h"

namespace dltune::engine {
namespace {

bool bit(unsigned v, int b) { return ((v >> b) & 1u) != 0; }

// XCR0: the register state the OS saves (bits 1-2 SSE/AVX, 5-7 AVX-512, 17-18 AMX tiles).
unsigned long long xcr0() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  __cpuid(1, a, b, c, d);
  if (!bit(c, 27)) return 0;  // no OSXSAVE: no XGETBV
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}

struct Masked {
  CpuFeatures features;
  std::string error;
};

const Masked& masked() {
  static const Masked m = [] {
    Masked r;
    r.features = cpu_features_unmasked();
    r.error = apply_cpu_mask(env::get(env::kCpuMask), &r.features);
    if (!r.error.empty()) {
      DLTUNE_LOG(kError, "engine") << r.error;
    }
    return r;
  }();
  return m;
}

}  // namespace

CpuFeatures cpu_features_unmasked() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid(1, a, b, c, d);
  const bool fma = bit(c, 12), f16c = bit(c, 29), avx = bit(c, 28);
  const unsigned long long x = xcr0();
  const bool ymm = (x & 0x6) == 0x6, zmm = (x & 0xE6) == 0xE6, tiles = (x & 0x60000) == 0x60000;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = avx && ymm && bit(b, 5);
  f.fma = f.avx2 && fma;
  f.f16c = f.avx2 && f16c;
  f.avx512 = zmm && bit(b, 16) && bit(b, 17) && bit(b, 30) && bit(b, 31);
  f.amx_bf16 = f.avx512 && tiles && bit(d, 22) && bit(d, 24);
  const unsigned max_sub = a;
  if (max_sub >= 1) {
    unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    f.avx512_bf16 = f.avx512 && bit(a1, 5);
  }
  return f;
}

std::string apply_cpu_mask(const std::string& mask, CpuFeatures* out) {
  CpuFeatures copy = *out;  // committed only when every name parsed
  CpuFeatures* f = &copy;
  std::stringstream in(mask);
  std::string name, took;
  while (std::getline(in, name, ',')) {
    while (!name.empty() && name.front() == ' ') name.erase(name.begin());
    while (!name.empty() && name.back() == ' ') name.pop_back();
    if (name.empty()) continue;
    if (name == "avx2") {
      f->avx2 = f->fma = f->f16c = false;
      f->avx512 = f->avx512_bf16 = f->amx_bf16 = false;
    } else if (name == "avx512") {
      f->avx512 = f->avx512_bf16 = f->amx_bf16 = false;
    } else if (name == "bf16") {
      f->avx512_bf16 = false;
    } else if (name == "amx") {
      f->amx_bf16 = false;
    } else {
      return "DLTUNE_CPU_MASK: unknown feature '" + name +
             "'; use a comma-separated list of avx512, bf16, amx, avx2 (the mask is ignored)";
    }
    took += (took.empty() ? "" : ",") + name;
  }
  f->masked = took;
  *out = copy;
  return "";
}

const CpuFeatures& cpu_features() { return masked().features; }

const std::string& cpu_features_error() { return masked().error; }

std::string CpuFeatures::describe() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (on) s += (s.empty() ? "" : " ") + std::string(name);
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx512, "avx512");
  add(avx512_bf16, "avx512_bf16");
  add(amx_bf16, "amx_bf16");
  if (s.empty()) s = "baseline x86-64";
  if (!masked.empty()) s += " (masked: " + masked + ")";
  return s;
}

}  // namespace dltune::engine
