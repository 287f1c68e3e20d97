#include "topology/xml_scan.h"

#include <cstdint>

#include "common/strings.h"

namespace dltune::topology {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}

bool is_name_char(char c) {
  return is_name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

// Appends code point `cp` as UTF-8; false for code points XML does not allow.
bool append_utf8(uint32_t cp, std::string* out) {
  if (cp == 0 || (cp < 0x20 && cp != 0x9 && cp != 0xA && cp != 0xD) ||
      (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
    return false;
  }
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return true;
}

// Decodes one entity or character reference `ref` (the text between '&' and ';').
bool decode_reference(std::string_view ref, std::string* out) {
  if (ref == "amp") return out->push_back('&'), true;
  if (ref == "lt") return out->push_back('<'), true;
  if (ref == "gt") return out->push_back('>'), true;
  if (ref == "quot") return out->push_back('"'), true;
  if (ref == "apos") return out->push_back('\''), true;
  if (ref.size() < 2 || ref[0] != '#' || ref.size() > 10) return false;
  const bool hex = ref[1] == 'x';
  const std::string_view digits = ref.substr(hex ? 2 : 1);
  if (digits.empty()) return false;
  uint32_t cp = 0;
  for (char c : digits) {
    uint32_t d = 0;
    if (c >= '0' && c <= '9') {
      d = static_cast<uint32_t>(c - '0');
    } else if (hex && c >= 'a' && c <= 'f') {
      d = static_cast<uint32_t>(c - 'a' + 10);
    } else if (hex && c >= 'A' && c <= 'F') {
      d = static_cast<uint32_t>(c - 'A' + 10);
    } else {
      return false;
    }
    cp = cp * (hex ? 16 : 10) + d;
    if (cp > 0x10FFFF) return false;
  }
  return append_utf8(cp, out);
}

}  // namespace

const std::string* XmlEvent::attribute(std::string_view key) const {
  for (const auto& [k, v] : attributes)
    if (k == key) return &v;
  return nullptr;
}

XmlScanner::XmlScanner(std::string_view text, const XmlLimits& limits)
    : text_(text), limits_(limits) {
  if (text_.size() > limits_.max_bytes) {
    fail("the file is larger than " + std::to_string(limits_.max_bytes >> 20) + " MiB");
    return;
  }
  size_t bad = 0;
  if (!strings::valid_utf8(text_, &bad)) {
    for (size_t i = 0; i < bad; ++i) line_ += text_[i] == '\n' ? 1 : 0;
    fail("bytes that are not UTF-8");
    return;
  }
  // XML 1.0 allows no control character but tab, line feed and carriage return (libxml2, which
  // hwloc reads exports with, refuses them; found by fuzzing).
  for (size_t i = 0; i < text_.size(); ++i) {
    const auto c = static_cast<unsigned char>(text_[i]);
    if (c == '\n') ++line_;
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
      fail("a control character (byte " + std::to_string(c) + ")");
      return;
    }
  }
  line_ = 1;
  if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;  // byte order mark
  start_ = pos_;
}

bool XmlScanner::fail(const std::string& message) {
  if (status_.ok()) status_ = invalid_input("line " + std::to_string(line_) + ": " + message);
  return false;
}

void XmlScanner::advance(size_t n) {
  for (size_t i = 0; i < n && pos_ < text_.size(); ++i, ++pos_) line_ += text_[pos_] == '\n';
}

void XmlScanner::skip_space() {
  while (pos_ < text_.size() && is_space(text_[pos_])) advance(1);
}

bool XmlScanner::skip_markup() {
  const std::string_view rest = text_.substr(pos_);
  auto skip_past = [&](std::string_view open, std::string_view close, const char* what) {
    const size_t end = rest.find(close, open.size());
    if (end == std::string_view::npos) return fail(std::string("unterminated ") + what);
    advance(end + close.size());
    return true;
  };
  if (rest.starts_with("<!--")) return skip_past("<!--", "-->", "comment");
  if (rest.starts_with("<?xml") && rest.size() > 5 &&
      (rest[5] == ' ' || rest[5] == '\t' || rest[5] == '\n' || rest[5] == '\r' || rest[5] == '?') &&
      pos_ != start_) {
    return fail("an XML declaration after the start of the file");  // libxml2 refuses it too
  }
  if (rest.starts_with("<?")) return skip_past("<?", "?>", "processing instruction");
  if (rest.starts_with("<![CDATA[")) {
    if (open_.empty()) return fail("CDATA outside the document element");
    return skip_past("<![CDATA[", "]]>", "CDATA section");
  }
  if (rest.starts_with("<!DOCTYPE")) {
    if (root_seen_) return fail("a DOCTYPE after the document element");
    // An internal subset could declare entities; hwloc exports never have one.
    for (size_t i = 9; i < rest.size(); ++i) {
      if (rest[i] == '[') return fail("a DOCTYPE with an internal subset is not accepted");
      if (rest[i] == '>') {
        advance(i + 1);
        return true;
      }
    }
    return fail("unterminated DOCTYPE");
  }
  return fail("unexpected markup '" + std::string(rest.substr(0, 9)) + "'");
}

bool XmlScanner::read_name(std::string* out) {
  const size_t start = pos_;
  if (pos_ >= text_.size() || !is_name_start(text_[pos_])) return fail("expected a name");
  while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
  if (pos_ - start > limits_.max_name_bytes) {
    return fail("a name longer than " + std::to_string(limits_.max_name_bytes) + " bytes");
  }
  out->assign(text_.substr(start, pos_ - start));
  return true;
}

bool XmlScanner::read_attribute_value(std::string* out) {
  if (pos_ >= text_.size() || (text_[pos_] != '"' && text_[pos_] != '\'')) {
    return fail("an attribute value must be quoted");
  }
  const char quote = text_[pos_];
  advance(1);
  out->clear();
  while (true) {
    if (pos_ >= text_.size()) return fail("unterminated attribute value");
    const char c = text_[pos_];
    if (c == quote) break;
    if (c == '<') return fail("'<' in an attribute value");
    if (c == '&') {
      const size_t semi = text_.find(';', pos_);
      if (semi == std::string_view::npos || semi - pos_ > 12 ||
          !decode_reference(text_.substr(pos_ + 1, semi - pos_ - 1), out)) {
        return fail("a bad entity or character reference in an attribute value");
      }
      advance(semi + 1 - pos_);
    } else {
      out->push_back(c);
      advance(1);
    }
    if (out->size() > limits_.max_value_bytes) {
      return fail("an attribute value longer than " + std::to_string(limits_.max_value_bytes) +
                  " bytes");
    }
  }
  advance(1);
  return true;
}

bool XmlScanner::read_start(XmlEvent* e) {
  if (open_.empty() && root_seen_) return fail("a second document element");
  if (++elements_ > limits_.max_elements) {
    return fail("more than " + std::to_string(limits_.max_elements) + " elements");
  }
  e->kind = XmlEvent::kStart;
  e->line = line_;
  e->attributes.clear();
  e->self_closing = false;
  advance(1);  // '<'
  if (!read_name(&e->name)) return false;
  while (true) {
    const size_t before = pos_;
    skip_space();
    if (pos_ >= text_.size()) return fail("unterminated tag <" + e->name + ">");
    if (text_[pos_] == '>' || text_.substr(pos_, 2) == "/>") break;
    if (pos_ == before) return fail("expected white space between attributes");
    std::string name, value;
    if (!read_name(&name)) return false;
    skip_space();
    if (pos_ >= text_.size() || text_[pos_] != '=') return fail("expected '=' after " + name);
    advance(1);
    skip_space();
    if (!read_attribute_value(&value)) return false;
    if (e->attribute(name) != nullptr) return fail("attribute " + name + " given twice");
    if (e->attributes.size() >= limits_.max_attributes) {
      return fail("more than " + std::to_string(limits_.max_attributes) + " attributes");
    }
    e->attributes.emplace_back(std::move(name), std::move(value));
  }
  e->self_closing = text_[pos_] == '/';
  advance(e->self_closing ? 2 : 1);
  if (static_cast<int>(open_.size()) >= limits_.max_depth) {
    return fail("elements nested deeper than " + std::to_string(limits_.max_depth) + " levels");
  }
  root_seen_ = true;
  e->depth = static_cast<int>(open_.size()) + 1;
  if (e->self_closing) {
    pending_ = XmlEvent{XmlEvent::kEnd, e->name, {}, false, e->line, e->depth};
    pending_end_ = true;
  } else {
    open_.push_back(e->name);
  }
  return true;
}

bool XmlScanner::read_end(XmlEvent* e) {
  e->kind = XmlEvent::kEnd;
  e->line = line_;
  e->attributes.clear();
  e->self_closing = false;
  advance(2);  // "</"
  if (!read_name(&e->name)) return false;
  skip_space();
  if (pos_ >= text_.size() || text_[pos_] != '>') return fail("unterminated end tag");
  advance(1);
  if (open_.empty() || open_.back() != e->name) {
    return fail("</" + e->name + "> does not close " +
                (open_.empty() ? std::string("any element") : "<" + open_.back() + ">"));
  }
  e->depth = static_cast<int>(open_.size());
  open_.pop_back();
  return true;
}

bool XmlScanner::next(XmlEvent* e) {
  if (!status_.ok()) return false;
  if (pending_end_) {
    pending_end_ = false;
    *e = pending_;
    return true;
  }
  while (pos_ < text_.size()) {
    const char c = text_[pos_];
    if (c != '<') {
      // Text: only inside the document element, and only well-formed references.
      if (open_.empty() && !is_space(c)) return fail("text outside the document element");
      if (c == '&') {
        const size_t semi = text_.find(';', pos_);
        std::string ignored;
        if (semi == std::string_view::npos || semi - pos_ > 12 ||
            !decode_reference(text_.substr(pos_ + 1, semi - pos_ - 1), &ignored)) {
          return fail("a bad entity or character reference");
        }
      }
      advance(1);
      continue;
    }
    const std::string_view rest = text_.substr(pos_);
    if (rest.starts_with("<!") || rest.starts_with("<?")) {
      if (!skip_markup()) return false;
      continue;
    }
    if (rest.starts_with("</")) return read_end(e);
    return read_start(e);
  }
  if (!open_.empty()) return fail("the file ends inside <" + open_.back() + ">");
  if (!root_seen_) return fail("no document element");
  return false;
}

}  // namespace dltune::topology
