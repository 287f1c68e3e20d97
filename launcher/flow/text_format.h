// Small formatting helpers the launcher's summaries, reports and predictions share.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "common/number_text.h"
#include "common/strings.h"

namespace dltune::launcher::text {

// j[key] as a number, or `fallback` when it is absent or not a number (null included).
inline double num(const nlohmann::json& j, const char* key, double fallback = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

// j[key] as a boolean, false when it is absent or not a boolean.
inline bool flag(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

// `v` with `digits` decimals ("%.*f").
inline std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// `v` rounded, its thousands separated by commas: 4249.3 -> "4,249" (common/number_text.h).
using strings::thousands;

// `b` bytes in readable units (strings::format_bytes); negative counts as 0.
inline std::string bytes_text(double b) {
  return strings::format_bytes(static_cast<uint64_t>(std::max(0.0, b)));
}

// `seconds` in milliseconds with two decimals: 0.01234 -> "12.34 ms".
inline std::string ms(double seconds) { return fixed(1e3 * seconds, 2) + " ms"; }

}  // namespace dltune::launcher::text
