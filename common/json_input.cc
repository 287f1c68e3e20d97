#include "common/json_input.h"

#include <string>

namespace dltune {

Status check_json_bounds(std::string_view text, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return invalid_input("larger than " + std::to_string(limits.max_bytes) + " bytes (" +
                         std::to_string(text.size()) + ")");
  }
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is, cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limits.max_depth) {
        return invalid_input("nested deeper than " + std::to_string(limits.max_depth) +
                             " levels (at byte " + std::to_string(i) + ")");
      }
    } else if (c == ']' || c == '}') {
      --depth;  // unbalanced text is the parser's to reject
    }
  }
  return ok_status();
}

Result<nlohmann::json> parse_json_bounded(std::string_view text, const JsonLimits& limits) {
  DLTUNE_TRY(check_json_bounds(text, limits));
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 5: ...".
    std::string what = e.what();
    if (const size_t close = what.find("] "); close != std::string::npos) {
      what = what.substr(close + 2);
    }
    return invalid_input("not valid JSON: " + what.substr(0, 200));
  } catch (const std::exception& e) {
    return invalid_input(std::string("not valid JSON: ") + e.what());
  }
}

}  // namespace dltune
