// A small, bounded XML pull scanner for input that must be checked before a library parses
// it (hwloc XML exports: topology/xml_check.h). Not a general XML parser: it reads elements,
// attributes (with the five predefined entities and character references), comments,
// processing instructions, CDATA and a DOCTYPE without an internal subset, and skips text.
// Everything is bounded (size, depth, element and attribute counts, name and value lengths),
// nothing recurses, and the first problem ends the scan with "line N: what".
//
//   XmlScanner s(text, limits);
//   XmlEvent e;
//   while (s.next(&e)) { if (e.kind == XmlEvent::kStart) ...; }
//   if (!s.status()) return s.status().error();
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

namespace dltune::topology {

struct XmlLimits {
  size_t max_bytes = size_t{64} << 20;
  int max_depth = 64;
  size_t max_elements = size_t{1} << 20;
  size_t max_attributes = 64;          // per element
  size_t max_name_bytes = 64;          // element and attribute names
  size_t max_value_bytes = 256 << 10;  // one attribute value, after decoding
};

struct XmlEvent {
  enum Kind { kStart, kEnd };
  Kind kind = kStart;
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;  // decoded values, in order
  bool self_closing = false;  // kStart of <x/>: a kEnd event follows at once
  int line = 0;               // 1-based line of the tag's '<'
  int depth = 0;              // 1 for the document element

  // The value of attribute `key`, or nullptr.
  const std::string* attribute(std::string_view key) const;
};

class XmlScanner {
 public:
  XmlScanner(std::string_view text, const XmlLimits& limits);

  // The next start or end tag. False at the end of the document or at the first problem
  // (status() says which). A document must have exactly one root element, balanced tags,
  // well-formed UTF-8 and nothing but comments, processing instructions and white space
  // outside the root.
  bool next(XmlEvent* event);
  // Ok until a problem was found; then invalid_input "line N: ...".
  const Status& status() const { return status_; }

 private:
  bool fail(const std::string& message);
  bool skip_markup();  // comments, PIs, DOCTYPE, CDATA at pos_; false on a problem
  bool read_name(std::string* out);
  bool read_attribute_value(std::string* out);
  bool read_start(XmlEvent* event);
  bool read_end(XmlEvent* event);
  void advance(size_t n);
  void skip_space();

  std::string_view text_;
  XmlLimits limits_;
  size_t pos_ = 0;
  size_t start_ = 0;  // where the document starts (after a byte order mark)
  int line_ = 1;
  std::vector<std::string> open_;  // names of the open elements
  size_t elements_ = 0;
  bool root_seen_ = false;
  bool pending_end_ = false;  // a self-closing element's end event is due
  XmlEvent pending_;
  Status status_;
};

}  // namespace dltune::topology
