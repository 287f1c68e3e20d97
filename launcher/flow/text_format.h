// Small formatting helpers the launcher's summaries, reports and predictions share.
#pragma once

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace dltune::launcher::text {

// j[key] as a number, or `fallback` when it is absent or not a number (null included).
inline double num(const nlohmann::json& j, const char* key, double fallback = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

// `v` with `digits` decimals ("%.*f").
inline std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace dltune::launcher::text
