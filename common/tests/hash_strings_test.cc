#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "common/hash.h"
#include "common/strings.h"

namespace dltune {
namespace {

// FIPS 180-4 / NIST CAVP example vectors.
void known_vectors() {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

void incremental() {
  const std::string s = "The quick brown fox jumps over the lazy dog, many times over. 0123456789";
  for (size_t cut = 0; cut <= s.size(); cut += 7) {
    Sha256 h;
    h.update(s.substr(0, cut));
    h.update(s.substr(cut));
    EXPECT_EQ(h.hex_digest(), sha256_hex(s)) << cut;
  }
}

// Runs `body` with the portable code and, where the CPU has SHA extensions, with them.
template <typename F>
void both_implementations(F body) {
  const bool hw = sha256_hardware();
  for (bool on : {false, true}) {
    set_sha256_hardware(on);
    if (on && !sha256_hardware()) continue;  // this CPU has no SHA extensions
    SCOPED_TRACE(on ? "SHA extensions" : "portable");
    body();
  }
  set_sha256_hardware(hw);
}

TEST(Sha256, KnownVectors) { both_implementations(known_vectors); }

TEST(Sha256, IncrementalEqualsOneShot) { both_implementations(incremental); }

// Pieces of every length around the 64-byte block, over a megabyte: both implementations agree.
TEST(Sha256, HardwareAndPortableAgree) {
  std::string s(1 << 20, '\0');
  uint32_t x = 12345;
  for (char& c : s) c = static_cast<char>((x = x * 1664525u + 1013904223u) >> 24);
  auto pieces = [&] {
    Sha256 h;
    size_t at = 0;
    for (size_t len = 0; at < s.size(); len = (len + 37) % 200) {
      const size_t n = std::min(len, s.size() - at);
      h.update(s.data() + at, n);
      at += n;
    }
    return h.hex_digest();
  };
  const bool hw = sha256_hardware();
  set_sha256_hardware(false);
  const std::string portable = sha256_hex(s);
  EXPECT_EQ(pieces(), portable);
  set_sha256_hardware(true);
  EXPECT_EQ(sha256_hex(s), portable);
  EXPECT_EQ(pieces(), portable);
  set_sha256_hardware(hw);
}

TEST(Strings, ParseBytes) {
  struct Case {
    const char* in;
    uint64_t want;
  };
  for (const Case& c :
       {Case{"0", 0}, Case{"4096", 4096}, Case{"4k", 4000}, Case{"64MiB", 64ull << 20},
        Case{"1gib", 1ull << 30}, Case{"2GB", 2000000000ull}}) {
    auto r = strings::parse_bytes(c.in);
    ASSERT_TRUE(r.ok()) << c.in;
    EXPECT_EQ(*r, c.want) << c.in;
  }
  for (const char* bad : {"", "-1", "4 KiB", "x", "12TB", "99999999999999999999"}) {
    auto r = strings::parse_bytes(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message().find("byte count"), std::string::npos);
  }
}

TEST(Strings, FormatBytes) {
  EXPECT_EQ(strings::format_bytes(4), "4 B");
  EXPECT_EQ(strings::format_bytes(64 << 10), "64 KiB");
  EXPECT_EQ(strings::format_bytes(3 << 19), "1.5 MiB");
  EXPECT_EQ(strings::format_bytes(256ull << 20), "256 MiB");
}

TEST(Strings, SplitJoinTrim) {
  EXPECT_EQ(strings::split("a,,b", ','), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(strings::split("", ','), (std::vector<std::string>{""}));
  EXPECT_EQ(strings::join({"a", "b", "c"}, ", "), "a, b, c");
  EXPECT_EQ(strings::trim("  x y \n"), "x y");
  EXPECT_EQ(strings::edit_distance("bacth", "batch"), 2u);
  EXPECT_EQ(strings::edit_distance("", "abc"), 3u);
}

TEST(Strings, ParseInt) {
  EXPECT_EQ(*strings::parse_int("0"), 0);
  EXPECT_EQ(*strings::parse_int("123"), 123);
  EXPECT_FALSE(strings::parse_int("-1").ok());
  EXPECT_FALSE(strings::parse_int("1x").ok());
  EXPECT_FALSE(strings::parse_int("").ok());
  // The largest int64 parses; one more, or 19 nines, is refused, never wrapped around (the
  // report: -9999999999999999999 became 8446744073709551617 in `recipe show`).
  EXPECT_EQ(*strings::parse_int("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(*strings::parse_int("00000000000000000000009"), 9);
  for (const char* big : {"9223372036854775808", "9999999999999999999", "18446744073709551617",
                          "99999999999999999999999999"}) {
    auto r = strings::parse_int(big);
    ASSERT_FALSE(r.ok()) << big;
    EXPECT_NE(r.error().message().find("too large"), std::string::npos) << r.error().message();
  }
}

TEST(Strings, ValidUtf8) {
  size_t at = 99;
  EXPECT_TRUE(strings::valid_utf8(""));
  EXPECT_TRUE(strings::valid_utf8("plain ASCII"));
  EXPECT_TRUE(strings::valid_utf8("caf\xc3\xa9 \xe2\x98\xba \xf0\x9f\x98\x80"));
  const std::pair<std::string, size_t> bad[] = {
      {"ab\xff", 2},            // never a UTF-8 byte
      {"a\x80", 1},             // a continuation byte first
      {"\xc0\xaf", 0},          // overlong '/'
      {"x\xe0\x80\xaf", 1},     // overlong, three bytes
      {"\xed\xa0\x80", 0},      // U+D800, a UTF-16 surrogate
      {"\xf4\x90\x80\x80", 0},  // past U+10FFFF
      {"ok\xe2\x98", 2},        // cut short
  };
  for (const auto& [text, offset] : bad) {
    EXPECT_FALSE(strings::valid_utf8(text, &at)) << text;
    EXPECT_EQ(at, offset) << text;
  }
}

// What a terminal would act on, in text from files others wrote (issue 43): found where it is,
// and escaped byte by byte for printing, the rest left alone.
TEST(Strings, FindControlAndPrintable) {
  using strings::find_control;
  const size_t none = std::string::npos;
  EXPECT_EQ(find_control(""), none);
  EXPECT_EQ(find_control("ring beat rd by 1.4x above 64 KiB; caf\xc3\xa9 \xe2\x98\xba"), none);
  const std::pair<std::string, size_t> found[] = {
      {"ok \x1b]0;pwned\x07", 3},   // ESC: an OSC sequence setting the window title
      {std::string("a\0b", 3), 1},  // NUL
      {"tab\there", 3},             // tab, unless allowed
      {"del\x7f", 3},               // DEL
      {"c1 \xc2\x9b"
       "31m",
       3},  // U+009B, CSI as UTF-8
      {"raw \x9b"
       "31m",
       4},  // CSI as a raw byte (not UTF-8 either)
      {"rtl \xe2\x80\xae"
       "gpj.exe",
       4},                      // U+202E RIGHT-TO-LEFT OVERRIDE
      {"iso \xe2\x81\xa6", 4},  // U+2066 LEFT-TO-RIGHT ISOLATE
      {"cut \xe2\x98", 4},      // UTF-8 cut short
  };
  for (const auto& [text, at] : found) EXPECT_EQ(find_control(text), at) << text;
  EXPECT_EQ(find_control("a\tb\nc", "\t\n"), none);
  EXPECT_EQ(find_control("a\tb\r", "\t\n"), 3u);

  EXPECT_EQ(strings::printable("why: ok \x1b]0;pwned\x07\x1b[31m!"),
            "why: ok \\x1b]0;pwned\\x07\\x1b[31m!");
  EXPECT_EQ(strings::printable("two\nlines"), "two\nlines");
  EXPECT_EQ(strings::printable("two\nlines", ""), "two\\x0alines");
  EXPECT_EQ(strings::printable("c1 \xc2\x9b raw \x9b"), "c1 \\xc2\\x9b raw \\x9b");
  EXPECT_EQ(strings::printable("caf\xc3\xa9"), "caf\xc3\xa9");
  // Whatever comes in, what goes out has nothing left to find.
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(find_control(strings::printable(all, "")), none);
}

}  // namespace
}  // namespace dltune
