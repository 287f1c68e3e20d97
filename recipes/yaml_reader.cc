#include "recipes/yaml_reader.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

#include <yaml-cpp/eventhandler.h>

#include "common/strings.h"

namespace dltune::recipes {
namespace {

// Bounds at or above this read as "no bound" in messages (recipe counts stop at INT32_MAX).
constexpr int64_t kUnboundedFrom = std::numeric_limits<int32_t>::max();
constexpr size_t kMaxStringBytes = 4096;

// A scalar written as text where a number is expected: quoted ("64", '64') or tagged as
// anything but a number (`!!str 64`, `!foo 64`). It is an error there, never read as a number.
bool is_quoted(const YAML::Node& v) {
  if (!v.IsScalar()) return false;
  const std::string& tag = v.Tag();
  return tag != "?" && tag != "tag:yaml.org,2002:int" && tag != "tag:yaml.org,2002:float";
}

std::string fmt_number(double d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", d);
  return buf;
}

std::string int_expectation(int64_t min, int64_t max) {
  if (max >= kUnboundedFrom && min == 1) return "a positive integer";
  if (max >= kUnboundedFrom && min == 0) return "a non-negative integer";
  if (max >= kUnboundedFrom) return "an integer >= " + std::to_string(min);
  return "an integer from " + std::to_string(min) + " to " + std::to_string(max);
}

std::string number_expectation(double min, bool min_open, double max, bool max_open) {
  if (std::isinf(max))
    return min_open ? "a number greater than " + fmt_number(min) : "a number >= " + fmt_number(min);
  return std::string("a number in ") + (min_open ? "(" : "[") + fmt_number(min) + ", " +
         fmt_number(max) + (max_open ? ")" : "]");
}

// A plain decimal number: [-+]digits[.digits][e[-+]digits] (or .digits). strtod alone would
// also take hex floats (0x1p-3), "inf" and "nan", which recipes document as errors.
bool is_decimal_number(const std::string& s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  size_t digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    size_t exp_digits = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  return i == s.size();
}

// Parses an optionally negative decimal integer; false when it is not one.
bool parse_signed(const std::string& s, int64_t* out) {
  const bool negative = !s.empty() && s[0] == '-';
  auto v = strings::parse_int(negative ? std::string_view(s).substr(1) : std::string_view(s));
  if (!v) return false;
  *out = negative ? -*v : *v;
  return true;
}

// "got the string "64"; write numbers without quotes" when a number was quoted.
std::string got(const YAML::Node& v, bool wants_number) {
  if (wants_number && is_quoted(v) && v.Tag() != "!") {
    // YAML's own tags as written: "tag:yaml.org,2002:str" is !!str.
    std::string tag = v.Tag();
    if (tag.starts_with("tag:yaml.org,2002:")) tag = "!!" + tag.substr(18);
    return "got the string \"" + shown_scalar(v.Scalar()) + "\" (tagged " + shown_scalar(tag) +
           "); write numbers without quotes or tags";
  }
  if (wants_number && is_quoted(v))
    return "got the string \"" + shown_scalar(v.Scalar()) + "\"; write numbers without quotes";
  return describe_value(v);
}

std::string join_names(const std::vector<std::string>& names) { return strings::join(names, ", "); }

}  // namespace

std::string join_key(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

std::string shown_scalar(const std::string& s) {
  // Messages go to terminals: no control characters, nothing that is not UTF-8, not too long.
  std::string out;
  const bool utf8 = strings::valid_utf8(s);
  for (size_t i = 0; i < s.size() && out.size() < 80; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    out += (c < 0x20 || c == 0x7f || (c >= 0x80 && !utf8)) ? '?' : s[i];
  }
  return out.size() < s.size() && out.size() >= 80 ? out + "..." : out;
}

std::string describe_value(const YAML::Node& v) {
  if (!v.IsDefined() || v.IsNull()) return "got nothing";
  if (v.IsMap()) return "got a mapping";
  if (v.IsSequence()) return "got a list";
  // Plain (unquoted) numbers print bare: "got -32"; anything else quoted: "got \"many\"".
  const std::string& s = v.Scalar();
  char* end = nullptr;
  (void)std::strtod(s.c_str(), &end);
  if (v.Tag() == "?" && !s.empty() && end == s.c_str() + s.size()) return "got " + shown_scalar(s);
  return "got \"" + shown_scalar(s) + "\"";
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  size_t best = std::numeric_limits<size_t>::max();
  const std::string* best_name = nullptr;
  for (const std::string& c : candidates) {
    const size_t d = strings::edit_distance(word, c);
    if (d < best) {
      best = d;
      best_name = &c;
    }
  }
  const size_t limit = word.size() >= 4 ? 2 : 1;
  if (best_name == nullptr || best == 0 || best > limit) return "";
  return " (did you mean '" + *best_name + "'?)";
}

const Fields::Entry* Fields::find(std::string_view key) const {
  for (const Entry& e : entries_)
    if (e.key.Scalar() == key) return &e;
  return nullptr;
}

void YamlReader::report(const YAML::Node& at, const std::string& key, std::string message) {
  Problem p;
  p.file = file_;
  const YAML::Mark m = at.IsDefined() ? at.Mark() : YAML::Mark::null_mark();
  if (m.line >= 0) {
    p.line = m.line + 1;
    p.column = m.column + 1;
  }
  p.key = key;
  p.message = std::move(message);
  problems_->push_back(std::move(p));
}

void YamlReader::report(const Fields::Entry& e, std::string message) {
  // A null value's mark points at the next token: locate it at its key instead.
  report(e.value.IsNull() ? e.key : e.value, e.path, std::move(message));
}

void YamlReader::report_at(int line, int column, const std::string& key, std::string message) {
  problems_->push_back({file_, line, column, key, std::move(message)});
}

void YamlReader::locate(const std::string& key, const YAML::Node& at) {
  if (where_ == nullptr || !at.IsDefined() || at.Mark().line < 0) return;
  (*where_)[key] = {at.Mark().line + 1, at.Mark().column + 1};
}

bool YamlReader::fields(const YAML::Node& node, const std::string& path,
                        std::initializer_list<std::string_view> allowed, Fields* out) {
  return fields(node, path, std::vector<std::string>(allowed.begin(), allowed.end()), out);
}

bool YamlReader::fields(const YAML::Node& node, const std::string& path,
                        const std::vector<std::string>& names, Fields* out) {
  out->path_ = path;
  out->node_ = node;
  out->entries_.clear();
  if (node.IsNull()) return true;  // `comm:` with nothing under it: all defaults
  if (!node.IsMap()) {
    report(node, path.empty() ? "recipe" : path,
           "expected a mapping with keys " + join_names(names) + ", " + describe_value(node));
    return false;
  }
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node key = it->first;
    if (!key.IsScalar()) {
      report(key, path.empty() ? "recipe" : path,
             "keys must be plain names, " + describe_value(key));
      continue;
    }
    const std::string kpath = join_key(path, key.Scalar());
    if (const Fields::Entry* first = out->find(key.Scalar())) {
      report(key, kpath,
             "duplicate key (first given at line " + std::to_string(first->key.Mark().line + 1) +
                 "); give each key once");
      continue;
    }
    bool known = false;
    for (const std::string& a : names) known = known || a == key.Scalar();
    if (!known) {
      report(key, kpath,
             "unknown key '" + key.Scalar() + "'" + did_you_mean(key.Scalar(), names) +
                 "; allowed here: " + join_names(names));
      continue;
    }
    out->entries_.push_back({key, it->second, kpath});
    locate(kpath, it->second.IsNull() ? key : it->second);
  }
  return true;
}

bool YamlReader::scalar_string(const YAML::Node& v, const std::string& path, std::string* out) {
  if (!v.IsScalar()) {
    report(v, path, "expected a string, " + describe_value(v));
    return false;
  }
  // An escape such as "\uD800" decodes to bytes that are not UTF-8 even in a UTF-8 file.
  if (!strings::valid_utf8(v.Scalar()) || v.Scalar().size() > kMaxStringBytes) {
    report(v, path, "expected UTF-8 text of at most " + std::to_string(kMaxStringBytes) + " bytes");
    return false;
  }
  // "\e[31m" in a double-quoted scalar is ESC: text reaches terminals (the dry run, the summary).
  if (const size_t bad = strings::find_control(v.Scalar(), "\t\n"); bad != std::string::npos) {
    report(v, path,
           "a control character (such as ESC or NUL) at byte " + std::to_string(bad) +
               "; recipe text is printable (tabs and newlines allowed)");
    return false;
  }
  *out = v.Scalar();
  return true;
}

bool YamlReader::scalar_int(const YAML::Node& v, const std::string& path, int64_t min, int64_t max,
                            int64_t* out) {
  int64_t value = 0;
  if (!v.IsScalar() || is_quoted(v) || !parse_signed(v.Scalar(), &value) || value < min) {
    report(v, path, "expected " + int_expectation(min, max) + ", " + got(v, true));
    return false;
  }
  if (value > max) {
    report(v, path, "expected at most " + std::to_string(max) + ", got " + std::to_string(value));
    return false;
  }
  *out = value;
  return true;
}

bool YamlReader::scalar_choice(const YAML::Node& v, const std::string& path,
                               const std::vector<std::string>& allowed, std::string* out) {
  if (v.IsScalar()) {
    for (const std::string& a : allowed) {
      if (a == v.Scalar()) {
        *out = a;
        return true;
      }
    }
  }
  std::string msg = "expected one of " + join_names(allowed) + ", " + describe_value(v);
  if (v.IsScalar()) msg += did_you_mean(v.Scalar(), allowed);
  report(v, path, msg);
  return false;
}

bool YamlReader::get_string(const Fields& f, std::string_view key, std::string* out) {
  const Fields::Entry* e = f.find(key);
  if (e == nullptr) return true;
  if (!e->value.IsScalar()) {
    report(*e, "expected a string, " + describe_value(e->value));
    return false;
  }
  return scalar_string(e->value, e->path, out);
}

bool YamlReader::get_int(const Fields& f, std::string_view key, int64_t min, int64_t max,
                         int64_t* out) {
  const Fields::Entry* e = f.find(key);
  if (e == nullptr) return true;
  if (e->value.IsNull()) {
    report(*e, "missing value; expected " + int_expectation(min, max));
    return false;
  }
  return scalar_int(e->value, e->path, min, max, out);
}

bool YamlReader::get_int_or_auto(const Fields& f, std::string_view key, int64_t* out) {
  const Fields::Entry* e = f.find(key);
  if (e == nullptr) return true;
  int64_t value = 0;
  if (e->value.IsScalar() && e->value.Scalar() == "auto") {
    *out = 0;
    return true;
  }
  if (!e->value.IsScalar() || is_quoted(e->value) || !parse_signed(e->value.Scalar(), &value) ||
      value < 1) {
    report(*e, "expected a positive integer or 'auto', " + got(e->value, true));
    return false;
  }
  if (value > kUnboundedFrom) {
    report(*e, "expected at most " + std::to_string(kUnboundedFrom) + " or 'auto', got " +
                   std::to_string(value));
    return false;
  }
  *out = value;
  return true;
}

bool YamlReader::get_number(const Fields& f, std::string_view key, double min, bool min_open,
                            double max, bool max_open, double* out) {
  const Fields::Entry* e = f.find(key);
  if (e == nullptr) return true;
  const std::string expect = number_expectation(min, min_open, max, max_open);
  bool good = e->value.IsScalar() && !is_quoted(e->value) && !e->value.Scalar().empty();
  double value = 0;
  if (good) {
    const std::string& s = e->value.Scalar();
    good = is_decimal_number(s);
  }
  if (good) {
    const std::string& s = e->value.Scalar();
    char* end = nullptr;
    value = std::strtod(s.c_str(), &end);
    good = end == s.c_str() + s.size() && std::isfinite(value);
  }
  if (!good) {
    report(*e, "expected " + expect + ", " + got(e->value, true));
    return false;
  }
  if (value < min || (min_open && value == min) || value > max || (max_open && value == max)) {
    report(*e, "expected " + expect + ", got " + fmt_number(value));
    return false;
  }
  *out = value;
  return true;
}

bool YamlReader::get_choice(const Fields& f, std::string_view key,
                            const std::vector<std::string>& allowed, std::string* out) {
  const Fields::Entry* e = f.find(key);
  if (e == nullptr) return true;
  if (e->value.IsNull()) {
    report(*e, "missing value; expected one of " + join_names(allowed));
    return false;
  }
  return scalar_choice(e->value, e->path, allowed, out);
}

bool YamlReader::get_bytes_or_auto(const Fields& f, std::string_view key, uint64_t min,
                                   uint64_t max, uint64_t* out) {
  const Fields::Entry* e = f.find(key);
  if (e == nullptr) return true;
  if (e->value.IsScalar() && e->value.Scalar() == "auto") {
    *out = 0;
    return true;
  }
  auto bytes = e->value.IsScalar() && !is_quoted(e->value) ? strings::parse_bytes(e->value.Scalar())
                                                           : Result<uint64_t>(invalid_input(""));
  if (!bytes) {
    report(*e, "expected a byte count such as 4096 or 64MiB, or 'auto', " + got(e->value, true));
    return false;
  }
  if (*bytes < min) {
    report(*e, "expected at least " + strings::format_bytes(min) + ", got " +
                   strings::format_bytes(*bytes));
    return false;
  }
  if (*bytes > max) {
    report(*e, "expected at most " + strings::format_bytes(max) + ", got " +
                   strings::format_bytes(*bytes));
    return false;
  }
  *out = *bytes;
  return true;
}

}  // namespace dltune::recipes

namespace dltune::recipes {
namespace {

constexpr size_t kMaxYamlBytes = size_t{1} << 20;
constexpr int kMaxYamlDepth = 32;
constexpr size_t kMaxYamlNodes = 100000;

// Thrown from the event handler to stop yaml-cpp at the first problem (it unwinds the parser's
// recursion, which never gets deeper than kMaxYamlDepth + 1 levels).
struct Stop {
  YAML::Mark mark;
  std::string message;
};

class LimitChecker : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { node(m); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override {
    throw Stop{m, "aliases (*name) are not supported in recipes; write the value out"};
  }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                const std::string&) override {
    node(m);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    open(m);
  }
  void OnSequenceEnd() override { --depth_; }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    open(m);
  }
  void OnMapEnd() override { --depth_; }

 private:
  void node(const YAML::Mark& m) {
    if (++nodes_ > kMaxYamlNodes) {
      throw Stop{m, "more than " + std::to_string(kMaxYamlNodes) + " values; a recipe is small"};
    }
  }
  void open(const YAML::Mark& m) {
    node(m);
    if (++depth_ > kMaxYamlDepth) {
      throw Stop{m, "nested deeper than " + std::to_string(kMaxYamlDepth) + " levels"};
    }
  }
  int depth_ = 0;
  size_t nodes_ = 0;
};

// Stops at the start of a document: only ever handed a second one, which a recipe must not have
// (YAML::Load would read the first and drop the rest without a word).
class SecondDocument : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& m) override {
    throw Stop{m,
               "a second YAML document starts here ('---' after the recipe); a recipe is one "
               "document: remove this '---' and what follows, or put it in a file of its own"};
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace

std::optional<Problem> precheck_yaml(std::string_view text, const std::string& file) {
  if (text.size() > kMaxYamlBytes) {
    return Problem{file, 0, 0, "recipe",
                   "the file is larger than 1 MiB (" + std::to_string(text.size()) +
                       " bytes); a recipe is a short YAML file"};
  }
  size_t bad = 0;
  if (!strings::valid_utf8(text, &bad)) {
    int line = 1, column = 1;
    for (size_t i = 0; i < bad; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
        ++column;
      }
    }
    return Problem{file, line, column, "syntax",
                   "bytes that are not UTF-8; save the recipe as UTF-8 text"};
  }
  std::istringstream in{std::string(text)};
  YAML::Parser parser(in);
  try {
    LimitChecker checker;
    parser.HandleNextDocument(checker);
  } catch (const Stop& s) {
    return Problem{file, s.mark.line + 1, s.mark.column + 1, "syntax", s.message};
  } catch (const YAML::Exception&) {
    // A syntax error: YAML::Load reports it with its position right after this.
    return std::nullopt;
  }
  try {
    SecondDocument second;
    parser.HandleNextDocument(second);
  } catch (const Stop& s) {
    return Problem{file, s.mark.line + 1, s.mark.column + 1, "syntax", s.message};
  } catch (const YAML::Exception& e) {
    const int line = e.mark.line >= 0 ? e.mark.line + 1 : 0;
    return Problem{file, line, line > 0 ? e.mark.column + 1 : 0, "syntax",
                   "after the recipe's YAML document: " + e.msg + "; a recipe is one document"};
  }
  return std::nullopt;
}

}  // namespace dltune::recipes
