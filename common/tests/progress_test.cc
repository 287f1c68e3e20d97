#include "common/progress.h"

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/log.h"

namespace dltune {
namespace {

std::vector<std::string> strings_of(const std::string& out) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = out.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(out.substr(start, nl - start));
  }
  return lines;
}

std::string run(Progress::Mode mode, void (*body)(Progress&)) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  {
    Progress p(mode, f, /*heartbeat=*/false);
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

TEST(Progress, JsonModeEmitsOneObjectPerLineWithItsTime) {
  const std::string out = run(Progress::Mode::kJson, [](Progress& p) {
    p.phase("tuning \"collectives\"");
    p.status("size 1 of 2", {{"size", 1}});
    p.update(ProgressState{1, 2, 0.5, 3});
    p.update(ProgressState{1, 2, 0.5, 3});  // the same step again: not printed twice
    p.update(ProgressState{2, 2, -1, 3});
    p.message("plan from cache");
  });
  std::vector<nlohmann::json> events;
  for (const std::string& line : strings_of(out)) events.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(events.size(), 5u) << out;
  for (const auto& e : events) EXPECT_TRUE(e["t"].is_number()) << e;
  EXPECT_EQ(events[0]["event"], "phase");
  EXPECT_EQ(events[0]["phase"], "tuning \"collectives\"");
  EXPECT_EQ(events[1]["event"], "status");
  EXPECT_EQ(events[1]["text"], "size 1 of 2");
  EXPECT_EQ(events[1]["size"], 1);
  EXPECT_EQ(events[2]["event"], "progress");
  EXPECT_EQ(events[2]["step"], 1);
  EXPECT_EQ(events[2]["loss"], 0.5);
  EXPECT_TRUE(events[2]["accuracy"].is_null());  // unknown: null, not a -1 sentinel
  EXPECT_TRUE(events[3]["loss"].is_null());
  EXPECT_EQ(events[4]["event"], "message");
  EXPECT_EQ(events[4]["text"], "plan from cache");
}

TEST(Progress, JsonHeartbeatsKeepAPhaseFromGoingQuiet) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  {
    Progress p(Progress::Mode::kJson, f);
    p.phase("tuning");
    std::this_thread::sleep_for(std::chrono::milliseconds(2600));
    p.finish();
  }
  std::fclose(f);
  const std::string out(buf, len);
  std::free(buf);
  double last = 0;
  int beats = 0;
  for (const std::string& line : strings_of(out)) {
    const auto e = nlohmann::json::parse(line);
    EXPECT_LE(e["t"].get<double>() - last, 1.6) << out;  // at most ~1 s apart (a loaded CI)
    last = e["t"].get<double>();
    beats += e["event"] == "heartbeat";
  }
  EXPECT_GE(beats, 1) << out;
}

TEST(Progress, StatusLineKeepsPhaseAndClockWhenShortened) {
  EXPECT_EQ(Progress::render_status("tuning", "size 3 of 8", 65, 200),
            "tuning: size 3 of 8  01:05");
  const std::string s = Progress::render_status("tuning", std::string(300, 'x'), 5, 40);
  EXPECT_EQ(s.size(), 40u);
  EXPECT_EQ(s.substr(0, 8), "tuning: ");
  EXPECT_EQ(s.substr(s.size() - 8), "x  00:05");
}

// Issue 42: at 110 columns the tuner's line lost its candidate and "best so far"; the phase's
// clock restarted at 00:00 with no sign of the launch's time.
TEST(Progress, AStatusTooLongKeepsItsStartAndEndAndTheLaunchClock) {
  const std::string status =
      "round 2 of 3, candidate 3 of 8, step 5 of 10: b64 weak bucket=4 MiB overlap; leading "
      "b32 weak bucket=one(1.7 MiB) no-overlap at 3,456 samples/s";
  const std::string s =
      Progress::render_status("tuning batch, buckets, overlap", status, 12, 110, 75);
  EXPECT_EQ(s.size(), 110u) << s;
  EXPECT_EQ(s.find("tuning batch, buckets, overlap: round 2 of 3, candidate 3"), 0u) << s;
  EXPECT_NE(s.find("..."), std::string::npos) << s;
  EXPECT_NE(s.find("at 3,456 samples/s  00:12 (launch 01:15)"), std::string::npos) << s;
  // The launch's clock only where it says more than the phase's.
  EXPECT_EQ(Progress::render_status("training", "", 12, 200, 12.5), "training  00:12");
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

TEST(Progress, TerminalModeShowsTheStatusWithItsClock) {
  const std::string out = run(Progress::Mode::kTerminal, [](Progress& p) {
    p.phase("tuning collectives");
    p.status("size 2 of 6 (1 MiB): ring, rd");
  });
  EXPECT_NE(out.find("\r\033[Ktuning collectives: size 2 of 6 (1 MiB): ring, rd  00:00"),
            std::string::npos)
      << out;
}

// A log line (stderr) written while the display is drawn on a terminal clears the display
// line first, so that it is not glued to it; the display comes back on the next redraw.
TEST(Progress, ALogLineClearsTheTerminalLineFirst) {
  FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p(Progress::Mode::kTerminal, f, /*heartbeat=*/false);
    p.phase("tuning");
    p.status("size 1 of 2");
    ::testing::internal::CaptureStderr();
    DLTUNE_LOG(kError, "test") << "a warning from the tuner";
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("a warning from the tuner"), std::string::npos);
    p.finish();
  }
  std::fflush(f);
  std::rewind(f);
  std::string out;
  for (int c; (c = std::fgetc(f)) != EOF;) out.push_back(static_cast<char>(c));
  std::fclose(f);
  // The status line, then the clear the log line asked for, then finish()'s own.
  EXPECT_NE(out.find("tuning: size 1 of 2  00:00\r\033[K\r\033[K"), std::string::npos) << out;
}

// The ETA counts from the first step reported, not from the phase's start: 30 s of start-up
// before step 1 and then 0.1 s a step is 29.8 s left at step 3 of 301, not ~3 000 s.
TEST(Progress, TheEtaLeavesTheStartUpOut) {
  EXPECT_NEAR(Progress::eta_from(1, 30.0, 3, 30.2, 301), 0.1 * 298, 1e-9);
  EXPECT_EQ(Progress::eta_from(1, 30.0, 1, 30.0, 301), -1);  // one step: no pace yet
  EXPECT_EQ(Progress::eta_from(-1, 0, 3, 1, 301), -1);       // no first step
  EXPECT_EQ(Progress::eta_from(1, 30.0, 3, 30.2, 0), -1);    // no total
  EXPECT_DOUBLE_EQ(Progress::eta_from(0, 5.0, 10, 6.0, 10), 0.0);
  // In the display: the first update has no ETA (JSON null), and start-up is not a step.
  const std::string out = run(Progress::Mode::kJson, [](Progress& p) {
    p.phase("training");
    p.update(ProgressState{1, 300, 2.3, 100});
  });
  const auto e = nlohmann::json::parse(strings_of(out).back());
  EXPECT_TRUE(e["eta_s"].is_null()) << out;
}

// Ctrl-C: the signal handler ends the drawn line, so that what is printed next (the child's
// or the launcher's message) starts on a line of its own, and nothing is drawn over it. In a
// child process: the display stops drawing for good.
std::string read_all(FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  for (int c; (c = std::fgetc(f)) != EOF;) out.push_back(static_cast<char>(c));
  return out;
}

TEST(ProgressDeathTest, ASignalEndsTheDrawnLine) {
  EXPECT_EXIT(
      {
        FILE* f = std::tmpfile();
        Progress p(Progress::Mode::kTerminal, f, /*heartbeat=*/false);
        p.phase("training");
        p.status("starting 2 ranks");
        Progress::break_line_from_signal();
        std::fputs("interrupted\n", f);             // as another writer on the terminal would
        p.update(ProgressState{10, 10, 0.5, 100});  // the last step: always drawn, but not now
        p.message("stopping the ranks");
        const std::string out = read_all(f);
        const bool ok =
            out.find("training: starting 2 ranks  00:00\ninterrupted\nstopping the ranks\n") !=
                std::string::npos &&
            out.find("10/10") == std::string::npos;
        std::fprintf(stderr, "%s", ok ? "" : out.c_str());
        std::_Exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(Progress, JsonEscape) { EXPECT_EQ(json_escape("a\"b\\c\n\x01"), "a\\\"b\\\\c\\n\\u0001"); }

}  // namespace
}  // namespace dltune
