// The corpus of bad recipes: every bad/<name>.yaml must produce exactly the problems listed,
// one per line, in bad/<name>.expected (`file:line:col: key: message`; @DIR@ stands for the
// absolute path of bad/). Regenerate a golden file after a deliberate wording change with
//   (cd recipes/tests/bad && dltune recipe check NAME.yaml 2>&1 | sed "s|$PWD|@DIR@|g")
// and review the diff.
#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/paths.h"
#include "common/strings.h"
#include "recipes/recipe.h"

#include "dltune/config.h"

namespace dltune::recipes {
namespace {

namespace fs = std::filesystem;

fs::path corpus_dir() { return fs::path(DLTUNE_SOURCE_DIR) / "recipes/tests/bad"; }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  for (std::string& line : strings::split(text, '\n'))
    if (!strings::trim(line).empty()) out.push_back(line);
  return out;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

std::vector<fs::path> corpus_files() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(corpus_dir()))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(BadRecipeCorpus, EveryFileGivesExactlyItsExpectedProblems) {
  const std::string dir = corpus_dir().string();
  const std::vector<fs::path> files = corpus_files();
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.filename().string());
    auto text = paths::read_file(file.string());
    ASSERT_TRUE(text.ok());
    fs::path expected_path = file;
    expected_path.replace_extension(".expected");
    auto expected_text = paths::read_file(expected_path.string());
    ASSERT_TRUE(expected_text.ok()) << "missing " << expected_path;
    const std::vector<std::string> expected = lines_of(replace_all(*expected_text, "@DIR@", dir));
    const ParseOutcome outcome = parse_recipe(*text, file.filename().string(), dir);
    std::vector<std::string> actual;
    for (const Problem& p : outcome.problems) actual.push_back(p.to_string());
    EXPECT_FALSE(outcome.ok());
    EXPECT_EQ(actual, expected);
  }
}

TEST(BadRecipeCorpus, HasAtLeastThirtyDistinctMistakes) {
  std::set<std::string> distinct;
  for (const fs::path& file : corpus_files()) {
    fs::path expected_path = file;
    expected_path.replace_extension(".expected");
    auto expected = paths::read_file(expected_path.string());
    ASSERT_TRUE(expected.ok()) << expected_path;
    // Distinct mistakes: the messages without the file name.
    distinct.insert(replace_all(*expected, file.filename().string(), ""));
  }
  EXPECT_GE(distinct.size(), 30u);
}

TEST(BadRecipeCorpus, EveryProblemIsLocatedAndNamesAKey) {
  const std::string dir = corpus_dir().string();
  for (const fs::path& file : corpus_files()) {
    SCOPED_TRACE(file.filename().string());
    auto text = paths::read_file(file.string());
    ASSERT_TRUE(text.ok());
    const ParseOutcome outcome = parse_recipe(*text, file.filename().string(), dir);
    for (const Problem& p : outcome.problems) {
      EXPECT_GT(p.line, 0) << p.to_string();
      EXPECT_GT(p.column, 0) << p.to_string();
      EXPECT_FALSE(p.key.empty()) << p.to_string();
      EXPECT_FALSE(p.message.empty()) << p.to_string();
    }
  }
}

}  // namespace
}  // namespace dltune::recipes
