// launcher/rank_output.h: mpirun's --output-filename, --timestamp-output and --tag-output, and
// srun --label's lines split into task and text.
#include "launcher/backend/rank_output.h"

#include <regex>
#include <string>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/paths.h"
#include "launcher/backend/srun_output.h"
#include "launcher/backend/temp_dir.h"

namespace dltune::launcher {
namespace {

std::string read(const std::string& path) {
  auto text = paths::read_file(path);
  return text ? *text : "<missing>";
}

TEST(RankOutputTest, ParsesOutputFilenameAsOpenMpiDoes) {
  auto o = parse_output_filename("/tmp/logs");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->dir, "/tmp/logs");
  EXPECT_TRUE(o->copy);
  o = parse_output_filename("/tmp/logs:NoCopy");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->dir, "/tmp/logs");
  EXPECT_FALSE(o->copy);
  // A relative directory is made absolute against the current one.
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  o = parse_output_filename("logs");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->dir, std::string(cwd) + "/logs");
  for (const char* bad : {"", ":nocopy", "/tmp/logs:copy", "/tmp/logs:"}) {
    auto r = parse_output_filename(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().kind(), ErrorKind::kInvalidInput) << bad;
  }
}

TEST(RankOutputTest, WritesEachRanksLinesToItsFilesAndPrintsThem) {
  auto tmp = TempDir::create_in_tmp("rank-output-test-");
  ASSERT_TRUE(tmp.ok());
  const std::string dir = tmp->path() + "/logs";
  auto out = RankOutput::open({dir, /*copy=*/true, /*timestamp=*/false, /*tag=*/true});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->line(1, false, "one"), "[1] one");
  EXPECT_EQ(out->line(0, true, "zero err"), "[0] zero err");
  EXPECT_EQ(out->line(1, false, "two"), "[1] two");
  EXPECT_EQ(out->line(-1, true, "srun: note"), "srun: note");  // no rank: printed only
  EXPECT_EQ(read(dir + "/1/rank.1/stdout"), "one\ntwo\n");
  EXPECT_EQ(read(dir + "/1/rank.0/stderr"), "zero err\n");
  EXPECT_FALSE(paths::exists(dir + "/1/rank.0/stdout"));
  EXPECT_FALSE(paths::exists(dir + "/1/rank.-1"));
}

TEST(RankOutputTest, NocopyKeepsRankLinesInTheFilesOnly) {
  auto tmp = TempDir::create_in_tmp("rank-output-test-");
  ASSERT_TRUE(tmp.ok());
  auto out = RankOutput::open({tmp->path(), /*copy=*/false, false, false});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->line(2, false, "quiet"), std::nullopt);
  EXPECT_EQ(out->line(-1, true, "srun: error: n1: task 2: Exited"),
            "srun: error: n1: task 2: Exited");
  EXPECT_EQ(read(tmp->path() + "/1/rank.2/stdout"), "quiet\n");
}

TEST(RankOutputTest, TimestampsComeFirstInFilesAndPrintedLines) {
  auto tmp = TempDir::create_in_tmp("rank-output-test-");
  ASSERT_TRUE(tmp.ok());
  auto out = RankOutput::open({tmp->path(), true, /*timestamp=*/true, /*tag=*/true});
  ASSERT_TRUE(out.ok());
  const auto printed = out->line(3, false, "hello");
  ASSERT_TRUE(printed.has_value());
  const std::regex stamp(R"(\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\] )");
  EXPECT_TRUE(std::regex_match(*printed, std::regex(R"(\[[^\]]+\] \[3\] hello)"))) << *printed;
  EXPECT_TRUE(std::regex_search(*printed, stamp)) << *printed;
  const std::string file = read(tmp->path() + "/1/rank.3/stdout");
  EXPECT_TRUE(std::regex_match(file, std::regex(R"(\[[^\]]+\] hello\n)"))) << file;
  // Without a directory or a tag: the time only.
  auto plain = RankOutput::open({"", true, true, false});
  ASSERT_TRUE(plain.ok());
  const auto line = plain->line(0, true, "x");
  ASSERT_TRUE(line.has_value());
  EXPECT_TRUE(std::regex_match(*line, std::regex(R"(\[[^\]]+\] x)"))) << *line;
}

TEST(RankOutputTest, TimestampPrefixIsLocalTimeWithMilliseconds) {
  setenv("TZ", "UTC", 1);
  tzset();
  // 2026-11-30T06:55:41.007 UTC
  EXPECT_EQ(RankOutput::timestamp_prefix(1796021741007), "[2026-11-30T06:55:41.007] ");
  EXPECT_EQ(RankOutput::timestamp_prefix(0), "[1970-01-01T00:00:00.000] ");
}

TEST(RankOutputTest, ADirectoryThatCannotBeMadeIsAnError) {
  auto tmp = TempDir::create_in_tmp("rank-output-test-");
  ASSERT_TRUE(tmp.ok());
  const std::string file = tmp->path() + "/a-file";
  ASSERT_TRUE(paths::write_file_atomic(file, "x").ok());
  auto parsed = parse_output_filename(file);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().kind(), ErrorKind::kInvalidInput);
  // A folder below a file cannot be made.
  auto out = RankOutput::open({file + "/logs", true, false, false});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(out.error().message().find("--output-filename"), std::string::npos);
}

TEST(RankOutputTest, SplitsSrunLabels) {
  EXPECT_EQ(split_srun_label("  3: text"), (std::pair<int, std::string_view>{3, "text"}));
  EXPECT_EQ(split_srun_label("12: a: b"), (std::pair<int, std::string_view>{12, "a: b"}));
  EXPECT_EQ(split_srun_label("0:"), (std::pair<int, std::string_view>{0, ""}));
  for (const char* other : {"srun: error: n1: task 0: Exited with exit code 1", "text", "", "  :x",
                            "3 : x", "12345678901: x"}) {
    EXPECT_EQ(split_srun_label(other).first, -1) << other;
    EXPECT_EQ(split_srun_label(other).second, other);
  }
}

}  // namespace
}  // namespace dltune::launcher
