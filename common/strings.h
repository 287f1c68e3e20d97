// Small string helpers shared by the CLI, parsers and reports.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace dltune::strings {

// Splits on `sep`; keeps empty fields ("a,,b" -> {"a","","b"}; "" -> {""}).
std::vector<std::string> split(std::string_view s, char sep);
// Joins with `sep` between items.
std::string join(const std::vector<std::string>& items, std::string_view sep);
// Removes leading and trailing ASCII white space.
std::string trim(std::string_view s);
bool starts_with(std::string_view s, std::string_view prefix);

// Parses a byte count: a non-negative integer with an optional suffix K, M, G (powers of 1000)
// or KiB, MiB, GiB (powers of 1024), case-insensitive ("64MiB", "4k", "1048576").
// Errors: "expected a byte count such as 4096 or 64MiB, got 'x'".
Result<uint64_t> parse_bytes(std::string_view s);
// Formats a byte count the short way: 4 B, 64 KiB, 1.5 MiB, 256 MiB.
std::string format_bytes(uint64_t bytes);
// Parses a non-negative decimal integer that fits in int64; rejects signs, spaces, suffixes,
// and values past INT64_MAX ("integer '...' is too large"), never wrapping around.
Result<int64_t> parse_int(std::string_view s);
// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF). Otherwise false, with *bad_offset (when not null) the offset of the first byte of
// the bad sequence.
bool valid_utf8(std::string_view s, size_t* bad_offset = nullptr);
// The offset of the first thing in `s` that a terminal would act on instead of showing, npos
// when there is none: a C0 control character (U+0000-U+001F, NUL, ESC, BEL, CR ... ; those in
// `allow`, e.g. "\t\n", excepted), DEL, a C1 control (U+0080-U+009F, as UTF-8 or as a raw
// byte), a bidirectional override or isolate (U+202A-U+202E, U+2066-U+2069), or a byte that is
// not part of well-formed UTF-8. Text from a database, bundle or plan must have none.
size_t find_control(std::string_view s, std::string_view allow = "");
// `s` made safe to print to a terminal: each byte of everything find_control() finds (with
// `keep` allowed) written as "\xHH", the rest unchanged. Defence in depth for whatever a file
// someone else wrote puts on the screen.
std::string printable(std::string_view s, std::string_view keep = "\n");
// Edit distance, for "did you mean" suggestions.
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace dltune::strings
