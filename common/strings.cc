#include "common/strings.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <limits>

namespace dltune::strings {

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t end = s.find(sep, start);
    if (end == std::string_view::npos) {
      out.emplace_back(s.substr(start));
      return out;
    }
    out.emplace_back(s.substr(start, end - start));
    start = end + 1;
  }
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    out += items[i];
  }
  return out;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

Result<int64_t> parse_int(std::string_view s) {
  const auto bad = [&] {
    return invalid_input("expected an integer, got '" + std::string(s.substr(0, 40)) + "'");
  };
  if (s.empty()) return bad();
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return bad();
    // Checked: 19 nines do not fit in int64 and must not wrap around to a small number.
    if (__builtin_mul_overflow(v, int64_t{10}, &v) || __builtin_add_overflow(v, c - '0', &v)) {
      return invalid_input("integer '" + std::string(s.substr(0, 40)) +
                           "' is too large (the largest is 9223372036854775807)");
    }
  }
  return v;
}

namespace {

// Decodes the UTF-8 sequence at s[i]: its code point and length, or 0 when it is not
// well-formed UTF-8 (a continuation byte first, an overlong form, a surrogate, a code point
// past U+10FFFF, a sequence cut short).
size_t decode_utf8(std::string_view s, size_t i, uint32_t* cp) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = 0;
  if (c < 0x80) {
    *cp = c;
    return 1;
  } else if (c >= 0xC2 && c <= 0xDF) {
    n = 1;
    *cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 2;
    *cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 3;
    *cp = c & 0x07;
  } else {
    return 0;  // a continuation byte first, an overlong lead (C0, C1) or beyond U+10FFFF
  }
  for (size_t k = 1; k <= n; ++k) {
    if (i + k >= s.size()) return 0;
    const auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0) != 0x80) return 0;
    *cp = (*cp << 6) | (d & 0x3F);
  }
  // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8.
  if ((n == 2 && *cp < 0x800) || (n == 3 && *cp < 0x10000) || *cp > 0x10FFFF ||
      (*cp >= 0xD800 && *cp <= 0xDFFF)) {
    return 0;
  }
  return n + 1;
}

bool is_control(uint32_t cp, std::string_view allow) {
  if (cp < 0x20) return allow.find(static_cast<char>(cp)) == std::string_view::npos;
  return cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

bool valid_utf8(std::string_view s, size_t* bad_offset) {
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t n = decode_utf8(s, i, &cp);
    if (n == 0) {
      if (bad_offset != nullptr) *bad_offset = i;
      return false;
    }
    i += n;
  }
  return true;
}

size_t find_control(std::string_view s, std::string_view allow) {
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t n = decode_utf8(s, i, &cp);
    if (n == 0 || is_control(cp, allow)) return i;
    i += n;
  }
  return std::string_view::npos;
}

std::string printable(std::string_view s, std::string_view keep) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    size_t n = decode_utf8(s, i, &cp);
    const bool bad = n == 0 || is_control(cp, keep);
    if (n == 0) n = 1;  // a byte that is not UTF-8: escaped alone
    if (!bad) {
      out.append(s.substr(i, n));
    } else {
      for (size_t k = 0; k < n; ++k) {
        const auto b = static_cast<unsigned char>(s[i + k]);
        out += "\\x";
        out += kHex[b >> 4];
        out += kHex[b & 0xf];
      }
    }
    i += n;
  }
  return out;
}

Result<uint64_t> parse_bytes(std::string_view s) {
  const std::string bad =
      "expected a byte count such as 4096 or 64MiB, got '" + std::string(s.substr(0, 40)) + "'";
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i == 0 || i > 19) return invalid_input(bad);
  uint64_t v = 0;
  for (size_t k = 0; k < i; ++k) v = v * 10 + static_cast<uint64_t>(s[k] - '0');
  std::string suffix;
  for (char c : s.substr(i))
    suffix.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  uint64_t mult = 1;
  if (suffix.empty() || suffix == "b")
    mult = 1;
  else if (suffix == "k" || suffix == "kb")
    mult = 1000;
  else if (suffix == "m" || suffix == "mb")
    mult = 1000 * 1000;
  else if (suffix == "g" || suffix == "gb")
    mult = 1000 * 1000 * 1000;
  else if (suffix == "kib")
    mult = 1ull << 10;
  else if (suffix == "mib")
    mult = 1ull << 20;
  else if (suffix == "gib")
    mult = 1ull << 30;
  else
    return invalid_input(bad);
  if (v > std::numeric_limits<uint64_t>::max() / mult) return invalid_input(bad + " (too large)");
  return v * mult;
}

std::string format_bytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (v == static_cast<double>(static_cast<uint64_t>(v))) {
    std::snprintf(buf, sizeof buf, "%llu %s", static_cast<unsigned long long>(v), kUnits[u]);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
  }
  return buf;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace dltune::strings
