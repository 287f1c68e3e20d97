#include "common/progress.h"

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

namespace dltune {
namespace {

std::string run(Progress::Mode mode, void (*body)(Progress&)) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  {
    Progress p(mode, f);
    body(p);
  }
  std::fclose(f);
  std::string s(buf, len);
  std::free(buf);
  return s;
}

TEST(Progress, RendersTheLine) {
  ProgressState s{50, 200, 0.1234, 1500.0, 0.9};
  EXPECT_EQ(Progress::render_line("training", s, 75, 200),
            "training  step 50/200 ( 25%)  loss 0.1234  acc 90.0%  1500 samples/s  ETA 01:15");
  EXPECT_EQ(Progress::render_line("tuning", ProgressState{3, 0}, -1, 200),
            "tuning  step 3  ETA --:--");
  EXPECT_EQ(Progress::render_line("training", s, 75, 10).size(), 10u);
}

TEST(Progress, PlainModePrintsEveryTenthAndTheEnd) {
  const std::string out = run(Progress::Mode::kPlain, [](Progress& p) {
    p.phase("training");
    for (long i = 1; i <= 100; ++i) p.update(ProgressState{i, 100, 1.0, 10});
    p.update(ProgressState{100, 100, 1.0, 10});  // the end reported again: printed once
    p.message("done");
  });
  size_t lines = 0;
  for (char c : out) lines += c == '\n';
  // The phase, the first update, one per 10 % (10, 20, ..., 100), the message.
  EXPECT_EQ(lines, 1u + 1u + 10u + 1u) << out;
  EXPECT_NE(out.find("step 100/100 (100%)"), std::string::npos);
  EXPECT_EQ(out.find('\r'), std::string::npos);  // no terminal control in plain mode
}

TEST(Progress, JsonModeEmitsOneObjectPerLine) {
  const std::string out = run(Progress::Mode::kJson, [](Progress& p) {
    p.phase("tuning \"collectives\"");
    p.update(ProgressState{1, 2, 0.5, 3});
    p.message("plan from cache");
  });
  EXPECT_NE(out.find(R"({"event":"phase","phase":"tuning \"collectives\""})"), std::string::npos);
  EXPECT_NE(out.find(R"("event":"progress","phase":"tuning \"collectives\"","step":1,"total":2)"),
            std::string::npos);
  EXPECT_NE(out.find(R"({"event":"message","text":"plan from cache"})"), std::string::npos);
}

TEST(Progress, TerminalModeRedrawsInPlaceAndClearsBeforeMessages) {
  const std::string out = run(Progress::Mode::kTerminal, [](Progress& p) {
    p.phase("training");
    p.update(ProgressState{1, 2});
    p.message("checkpoint written");
  });
  EXPECT_NE(out.find("\r\033[Ktraining  step 1/2"), std::string::npos);
  EXPECT_NE(out.find("\r\033[Kcheckpoint written\n"), std::string::npos);
}

TEST(Progress, JsonEscape) { EXPECT_EQ(json_escape("a\"b\\c\n\x01"), "a\\\"b\\\\c\\n\\u0001"); }

}  // namespace
}  // namespace dltune
