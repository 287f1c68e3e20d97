// Numbers as dltune's reasons, summaries and reports print them. Header-only and apart from
// common/strings.h so that every module (tuner/ as well as launcher/) writes them one way.
#pragma once

#include <cmath>
#include <string>

namespace dltune::strings {

// `v` rounded, its thousands separated by commas: 4249.3 -> "4,249", -1234 -> "-1,234".
inline std::string thousands(double v) {
  std::string s = std::to_string(std::llround(v));
  const size_t start = s[0] == '-' ? 1 : 0;
  for (int i = static_cast<int>(s.size()) - 3; i > static_cast<int>(start); i -= 3) {
    s.insert(static_cast<size_t>(i), ",");
  }
  return s;
}

}  // namespace dltune::strings
