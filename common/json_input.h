// Parsing JSON that comes from outside the process (bundles, plans, run files) with bounds
// checked before anything recursive touches it.
//
// nlohmann::json parses iteratively, but dump(), comparisons and copies recurse once per level:
// a 150 KB bundle nested 75,000 levels deep crashed `db import` on its checksum's dump(). So the
// text's nesting depth and size are measured first, by a linear scan that builds nothing.
//
//   auto j = parse_json_bounded(text, {.max_bytes = kMaxBundleBytes});
//   if (!j) return j.error().wrap("bundle '" + path + "'");
#pragma once

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace dltune {

struct JsonLimits {
  size_t max_bytes = size_t{64} << 20;
  int max_depth = 64;  // arrays and objects inside one another; a plan needs 4, a bundle 6
};

// Ok when `text` is at most limits.max_bytes long and no array or object in it sits deeper than
// limits.max_depth (counting brackets outside strings; the text need not be valid JSON).
// invalid_input otherwise: "nested deeper than 64 levels (at byte 1234)" or "larger than ...".
Status check_json_bounds(std::string_view text, const JsonLimits& limits = {});

// check_json_bounds(), then nlohmann's parser (strict: RFC 8259, UTF-8 strings). Never throws.
// invalid_input: the bound that failed, or "not valid JSON: <where and why>".
Result<nlohmann::json> parse_json_bounded(std::string_view text, const JsonLimits& limits = {});

}  // namespace dltune
