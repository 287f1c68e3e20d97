// Parsing and validation of program recipes (recipes/program.h), on the same YamlReader as the
// model recipes: the text is bounded by precheck_yaml() first, every problem is collected (never
// thrown) and located as `file:line:col: key.path: message`, then sorted by position.
//
// The sections are read in file order (program, tune, launch); the cross checks that need more
// than one section (the placeholders against the search, the search against the launch keys,
// the size of the search) run once all are read, each only when the keys it depends on parsed
// cleanly, so that one mistake is reported once. Keys a model recipe takes and a program recipe
// does not (`model`, `data`, `training`, `comm`; launch.memory_per_rank ...) get a sentence of
// their own instead of "unknown key".
#include <algorithm>
#include <cctype>
#include <exception>
#include <filesystem>
#include <regex>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include <yaml-cpp/yaml.h>

#include "common/paths.h"
#include "common/strings.h"
#include "recipes/program.h"
#include "recipes/recipe_parse_internal.h"
#include "recipes/yaml_reader.h"

namespace dltune::recipes {
namespace {

namespace fs = std::filesystem;
using internal::kMaxInt;

constexpr int64_t kMaxProgramSteps = 1000000000;
constexpr double kMaxTrialTimeoutS = 86400;
constexpr double kMaxBucketMb = 4096;
constexpr int64_t kMaxSearchedCount = 4096;  // an item of search.threads_per_rank / ranks_per_node
constexpr int64_t kMaxCombinations = 256;

using Refusals = std::vector<std::pair<std::string_view, std::string_view>>;

const Refusals kTopRefusals = {
    {"model", "program recipes do not take 'model': the program builds its own"},
    {"data", "program recipes do not take 'data': the program reads its own"},
    {"training",
     "program recipes do not take 'training': the program trains itself (program.steps sets "
     "its length)"},
    {"comm",
     "program recipes do not take 'comm': the program communicates itself (tune.search."
     "bucket_mb tunes its bucket)"}};
const Refusals kLaunchRefusals = {
    {"memory_per_rank", "only model recipes take 'memory_per_rank': dltune cannot size a program"},
    {"baseline", "only model recipes take 'baseline': a program runs no 1-rank baseline"},
    {"min_ranks", "only model recipes take 'min_ranks': a program restarts on the same ranks"},
    {"min_nodes", "only model recipes take 'min_nodes': a program restarts on the same nodes"},
    {"spare_nodes", "only model recipes take 'spare_nodes': a program restarts on the same nodes"}};

// A command argument or env value, kept for the placeholder checks once `tune` is read.
struct Templated {
  std::string key;
  YAML::Node at;
  std::string text;
};

struct Context {
  YamlReader& r;
  const std::vector<Problem>& problems;
  std::vector<Templated> templated;
};

// Whether `prefix` is `key` or one of its parents ("tune.search" of "tune.search.batch[2]").
bool key_under(std::string_view key, std::string_view prefix) {
  if (!key.starts_with(prefix)) return false;
  return key.size() == prefix.size() || key[prefix.size()] == '.' || key[prefix.size()] == '[';
}

// Whether parsing reported nothing under (or above) any of `keys`: a cross check of them runs.
bool clean(const Context& c, std::initializer_list<std::string_view> keys) {
  for (const Problem& p : c.problems) {
    if (p.key == "recipe" || p.key == "syntax") return false;
    for (std::string_view k : keys)
      if (key_under(p.key, k) || key_under(k, p.key)) return false;
  }
  return true;
}

// Reports a cross-check problem at `key`, or at its nearest located parent.
void report_key(Context& c, SourceMap& where, const std::string& key, std::string message) {
  std::string k = key;
  while (!k.empty()) {
    if (auto it = where.find(k); it != where.end()) {
      c.r.report_at(it->second.first, it->second.second, key, std::move(message));
      return;
    }
    const size_t cut = k.find_last_of(".[");
    k = cut == std::string::npos ? "" : k.substr(0, cut);
  }
  c.r.report_at(0, 0, key, std::move(message));
}

// `node` without the keys `refused` names (each reported with its reason).
YAML::Node without(YamlReader& r, const YAML::Node& node, const std::string& path,
                   const Refusals& refused) {
  if (!node.IsMap()) return node;
  YAML::Node kept(YAML::NodeType::Map);
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node key = it->first;
    bool dropped = false;
    for (const auto& [name, why] : refused) {
      if (key.IsScalar() && key.Scalar() == name) {
        r.report(key, join_key(path, name), std::string(why));
        dropped = true;
      }
    }
    if (!dropped) kept.force_insert(key, it->second);  // the same key node: its mark is kept
  }
  return kept;
}

// Why `name` may not be set in program.env, or "" when it may.
std::string env_name_problem(const std::string& name) {
  const bool shape = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                     std::all_of(name.begin(), name.end(), [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                     });
  if (!shape)
    return "'" + shown_scalar(name) +
           "' is not a variable name: letters, digits and '_', not starting with a digit";
  if (name.starts_with("DLTUNE_"))
    return "DLTUNE_ variables are dltune's own (it sets DLTUNE_BATCH, DLTUNE_BUCKET_MB, ...); "
           "choose another name";
  // What launcher/backend/rank_env.h gives every rank; the program reads them there.
  const std::string set =
      " RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK GROUP_WORLD_SIZE "
      "MASTER_ADDR MASTER_PORT OMP_NUM_THREADS OPENBLAS_NUM_THREADS "
      "MKL_NUM_THREADS ";
  if (set.find(" " + name + " ") != std::string::npos || name.starts_with("OMPI_COMM_WORLD_"))
    return "dltune sets " + name +
           " in every rank's environment itself; the program reads it there";
  return "";
}

void parse_command(Context& c, const Fields::Entry& program, const Fields& f, ProgramRecipe* p) {
  const Fields::Entry* e = f.find("command");
  if (e == nullptr) {
    c.r.report(program.key, "program.command",
               "missing 'command': the program and its arguments, such as [python3, train.py]");
    return;
  }
  if (!e->value.IsSequence() || e->value.size() == 0) {
    c.r.report(*e, "expected a non-empty list such as [python3, train.py, --batch, \"{batch}\"], " +
                       (e->value.IsSequence() ? std::string("got an empty list")
                                              : describe_value(e->value)));
    return;
  }
  for (size_t i = 0; i < e->value.size(); ++i) {
    const YAML::Node item = e->value[i];
    const std::string path = e->path + "[" + std::to_string(i) + "]";
    std::string arg;
    if (!c.r.scalar_string(item, path, &arg)) continue;
    c.r.locate(path, item);
    if (i == 0 && arg.empty()) c.r.report(item, path, "the program to run is empty");
    p->command.push_back(arg);
    c.templated.push_back({path, item, arg});
  }
}

void parse_env(Context& c, const Fields& f, ProgramRecipe* p) {
  const Fields::Entry* e = f.find("env");
  if (e == nullptr || e->value.IsNull()) return;
  if (!e->value.IsMap()) {
    c.r.report(*e,
               "expected a mapping of variable names to values such as {MY_BUCKET: "
               "\"{bucket_mb}\"}, " +
                   describe_value(e->value));
    return;
  }
  std::set<std::string> seen;
  for (auto it = e->value.begin(); it != e->value.end(); ++it) {
    const YAML::Node key = it->first, value = it->second;
    if (!key.IsScalar()) {
      c.r.report(key, e->path, "variable names must be plain names, " + describe_value(key));
      continue;
    }
    const std::string path = e->path + "." + key.Scalar();
    if (std::string why = env_name_problem(key.Scalar()); !why.empty()) {
      c.r.report(key, path, why);
      continue;
    }
    if (!seen.insert(key.Scalar()).second) {
      c.r.report(key, path, "duplicate variable; give each once");
      continue;
    }
    std::string text;
    if (!value.IsScalar()) {
      c.r.report(value.IsNull() ? key : value, path,
                 "expected a string or a number, " + describe_value(value));
      continue;
    }
    if (!c.r.scalar_string(value, path, &text)) continue;
    c.r.locate(path, value);
    p->env.emplace_back(key.Scalar(), text);
    c.templated.push_back({path, value, text});
  }
}

void check_pattern(YamlReader& r, const Fields::Entry& e, const std::string& pattern) {
  try {
    const std::regex re(pattern, std::regex::ECMAScript);
    if (re.mark_count() < 1)
      r.report(e,
               "the pattern has no capture group: put the number in parentheses, such as "
               "'samples/s: ([0-9.]+)'");
  } catch (const std::exception& ex) {  // std::regex_error, or a pattern too complex
    r.report(e, "not a valid regular expression (ECMAScript): " + std::string(ex.what()));
  }
}

void parse_throughput(Context& c, const Fields::Entry& program, const Fields& f,
                      ProgramThroughput* t) {
  const Fields::Entry* e = f.find("throughput");
  if (e == nullptr) {
    c.r.report(program.key, "program.throughput",
               "missing 'throughput': how dltune reads the program's speed, {pattern: "
               "'samples/s: ([0-9.]+)'} or {metrics: samples_per_s}");
    return;
  }
  Fields tf;
  const size_t before = c.r.problem_count();
  if (!c.r.fields(e->value, e->path, {"pattern", "metrics"}, &tf)) return;
  const bool misspelt = c.r.problem_count() > before;  // {metric: k}: said once, not twice
  if (tf.has("pattern") && tf.has("metrics")) {
    c.r.report(*tf.find("metrics"), "give pattern or metrics, not both");
    return;
  }
  if (!tf.has("pattern") && !tf.has("metrics")) {
    if (misspelt) return;
    c.r.report(*e,
               "give pattern (a regex matched on rank 0's output) or metrics (the key of "
               "the JSON lines the program appends to $DLTUNE_METRICS)");
    return;
  }
  if (c.r.get_string(tf, "pattern", &t->pattern) && tf.has("pattern"))
    check_pattern(c.r, *tf.find("pattern"), t->pattern);
  if (c.r.get_string(tf, "metrics", &t->metrics_key) && tf.has("metrics") && t->metrics_key.empty())
    c.r.report(*tf.find("metrics"),
               "an empty key; give the key of the throughput in the JSON "
               "lines, such as samples_per_s");
}

void parse_program(Context& c, const Fields::Entry& e, ProgramRecipe* p) {
  Fields f;
  if (!c.r.fields(e.value, e.path,
                  {"command", "env", "throughput", "steps", "trial_steps", "trial_timeout"}, &f))
    return;
  parse_command(c, e, f, p);
  parse_env(c, f, p);
  parse_throughput(c, e, f, &p->throughput);
  c.r.get_int(f, "steps", 1, kMaxProgramSteps, &p->steps);
  c.r.get_int(f, "trial_steps", 1, kMaxProgramSteps, &p->trial_steps);
  c.r.get_number(f, "trial_timeout", 0, true, kMaxTrialTimeoutS, false, &p->trial_timeout_s);
}

// A search list's items. With `is_auto`, the key may be `auto` instead (*is_auto set). Items are
// read by `item`, which reports a bad one and returns false.
template <typename T, typename ReadItem>
void parse_list(Context& c, const Fields& f, std::string_view key, bool* is_auto,
                std::vector<T>* out, const std::string& expected, ReadItem item) {
  const Fields::Entry* e = f.find(key);
  if (e == nullptr) return;
  if (is_auto != nullptr && e->value.IsScalar() && e->value.Scalar() == "auto") {
    *is_auto = true;
    return;
  }
  if (!e->value.IsSequence() || e->value.size() == 0) {
    c.r.report(*e, e->value.IsSequence()
                       ? "an empty list; give at least one value, or leave the key out"
                       : "expected " + expected + (is_auto ? " or 'auto'" : "") + ", " +
                             describe_value(e->value));
    return;
  }
  for (size_t i = 0; i < e->value.size(); ++i) {
    const YAML::Node v = e->value[i];
    const std::string path = e->path + "[" + std::to_string(i) + "]";
    if (is_auto != nullptr && v.IsScalar() && v.Scalar() == "auto") {
      c.r.report(v, path, "'auto' stands alone (" + std::string(key) + ": auto), not in a list");
      continue;
    }
    if (!v.IsScalar()) {  // a null item has no position of its own: point at the list
      c.r.report(v.IsNull() ? e->value : v, path,
                 "expected an item of " + expected + ", " + describe_value(v));
      continue;
    }
    T value{};
    if (!item(v, path, &value)) continue;
    if (std::find(out->begin(), out->end(), value) != out->end()) {
      c.r.report(v, path, "repeats " + v.Scalar() + "; give each value once");
      continue;
    }
    out->push_back(value);
  }
}

void parse_search(Context& c, const Fields::Entry& e, ProgramSearch* s) {
  Fields f;
  if (!c.r.fields(e.value, e.path, {"batch", "threads_per_rank", "ranks_per_node", "bucket_mb"},
                  &f))
    return;
  auto int_item = [&c](int64_t max) {
    return [&c, max](const YAML::Node& v, const std::string& path, int64_t* out) {
      return c.r.scalar_int(v, path, 1, max, out);
    };
  };
  parse_list(c, f, "batch", nullptr, &s->batch, "a list of positive integers such as [32, 64]",
             int_item(kMaxInt));
  const std::string counts = "a list of integers from 1 to 4096 such as [1, 2, 4]";
  parse_list(c, f, "threads_per_rank", &s->threads_auto, &s->threads_per_rank, counts,
             int_item(kMaxSearchedCount));
  parse_list(c, f, "ranks_per_node", &s->ranks_auto, &s->ranks_per_node, counts,
             int_item(kMaxSearchedCount));
  // Numbers go through the reader's number check as a one-entry mapping (as `betas` do), so that
  // they are refused and explained exactly as a number key is.
  auto mb_item = [&c, &f](const YAML::Node& v, const std::string& path, double* out) {
    const std::string label = path.substr(f.path().size() + 1);  // "bucket_mb[2]"
    YAML::Node one;
    one[label] = v;
    Fields of;
    return c.r.fields(one, f.path(), {label}, &of) &&
           c.r.get_number(of, label, 0, true, kMaxBucketMb, false, out);
  };
  parse_list(c, f, "bucket_mb", nullptr, &s->bucket_mb,
             "a list of numbers in (0, 4096] such as [1, 4, 25]", mb_item);
}

void parse_tune(Context& c, const Fields::Entry& e, ProgramRecipe* p) {
  Fields f;
  if (!c.r.fields(e.value, e.path, {"budget", "screening", "search"}, &f)) return;
  c.r.get_number(f, "budget", 0, false, kMaxTuneBudgetSeconds, false, &p->budget_seconds);
  c.r.get_choice(f, "screening", {"auto", "off"}, &p->screening);
  if (const Fields::Entry* s = f.find("search")) parse_search(c, *s, &p->search);
}

void parse_launch(Context& c, const Fields::Entry& e, LaunchConfig* l) {
  Fields f;
  const YAML::Node kept = without(c.r, e.value, e.path, kLaunchRefusals);
  if (!c.r.fields(kept, e.path,
                  {"ranks", "ranks_per_node", "threads_per_rank", "binding", "restarts"}, &f))
    return;
  c.r.get_int_or_auto(f, "ranks", &l->ranks);
  c.r.get_int_or_auto(f, "ranks_per_node", &l->ranks_per_node);
  c.r.get_int_or_auto(f, "threads_per_rank", &l->threads_per_rank);
  c.r.get_choice(f, "binding", {"none", "core", "numa", "auto"}, &l->binding);
  c.r.get_int(f, "restarts", 0, kMaxRestarts, &l->restarts);
}

// The top-level mapping, section by section.
void parse_document(Context& c, const YAML::Node& root, ProgramRecipe* p) {
  if (!root.IsDefined() || root.IsNull()) {
    c.r.report_at(1, 1, "recipe", "the file is empty; a program recipe needs at least 'program'");
    return;
  }
  Fields f;
  const YAML::Node kept = without(c.r, root, "", kTopRefusals);
  if (!c.r.fields(kept, "", {"name", "description", "program", "tune", "launch"}, &f)) return;
  if (c.r.get_string(f, "name", &p->name) && f.has("name") && !internal::valid_name(p->name))
    c.r.report(*f.find("name"), "'" + shown_scalar(p->name) +
                                    "' may only use letters, digits, '.', '_' and '-' (it names "
                                    "the run directory)");
  c.r.get_string(f, "description", &p->description);
  if (const Fields::Entry* e = f.find("program"))
    parse_program(c, *e, p);
  else
    c.r.report(root, "program",
               "missing required section 'program': the command to run and how it reports its "
               "throughput");
  if (const Fields::Entry* e = f.find("tune")) parse_tune(c, *e, p);
  if (const Fields::Entry* e = f.find("launch")) parse_launch(c, *e, &p->launch);
}

// Every placeholder of the command and env values is known, and set by the search or always.
void check_placeholders(Context& c, const ProgramRecipe& p) {
  ProgramValues probe;
  probe.steps = 1;
  probe.threads_per_rank = probe.ranks_per_node = probe.ranks = 1;
  // A search key parsing already complained about counts as given: one mistake, one problem.
  probe.batch = !p.search.batch.empty() || !clean(c, {"tune.search.batch"}) ? 1 : 0;
  probe.bucket_mb = !p.search.bucket_mb.empty() || !clean(c, {"tune.search.bucket_mb"}) ? 1 : 0;
  for (const Templated& t : c.templated)
    if (auto expanded = expand_placeholders(t.text, probe); !expanded)
      c.r.report(t.at, t.key, expanded.error().message());
}

// The search against the launch keys, and its size.
void check_search(Context& c, SourceMap& where, const ProgramRecipe& p) {
  const ProgramSearch& s = p.search;
  const LaunchConfig& l = p.launch;
  const bool ranks_searched = s.ranks_auto || !s.ranks_per_node.empty();
  if (ranks_searched && (l.ranks > 0 || l.ranks_per_node > 0) &&
      clean(c, {"launch.ranks", "launch.ranks_per_node", "tune.search.ranks_per_node"}))
    report_key(c, where, "tune.search.ranks_per_node",
               std::string(l.ranks > 0 ? "launch.ranks" : "launch.ranks_per_node") + " is " +
                   std::to_string(l.ranks > 0 ? l.ranks : l.ranks_per_node) +
                   ", so the ranks per node are not the search's to vary; remove one or the other");
  const bool threads_searched = s.threads_auto || !s.threads_per_rank.empty();
  if (threads_searched && l.threads_per_rank > 0 &&
      clean(c, {"launch.threads_per_rank", "tune.search.threads_per_rank"}))
    report_key(c, where, "tune.search.threads_per_rank",
               "launch.threads_per_rank is " + std::to_string(l.threads_per_rank) +
                   ", so the threads are not the search's to vary; remove one or the other");
  if (l.ranks > 0 && l.ranks_per_node > 0 && l.ranks % l.ranks_per_node != 0 &&
      clean(c, {"launch.ranks", "launch.ranks_per_node"}))
    report_key(c, where, "launch.ranks_per_node",
               "launch.ranks " + std::to_string(l.ranks) + " does not fill whole nodes of " +
                   std::to_string(l.ranks_per_node) + " ranks; use a divisor of " +
                   std::to_string(l.ranks));
  int64_t combinations = 1;
  std::vector<std::string> sizes;
  for (const auto& [name, n] : {std::pair<const char*, size_t>{"batch", s.batch.size()},
                                {"threads_per_rank", s.threads_per_rank.size()},
                                {"ranks_per_node", s.ranks_per_node.size()},
                                {"bucket_mb", s.bucket_mb.size()}}) {
    combinations *= static_cast<int64_t>(std::max<size_t>(n, 1));
    if (n > 0) sizes.push_back(name + std::string(" ") + std::to_string(n));
  }
  if (combinations > kMaxCombinations)
    report_key(c, where, "tune.search",
               std::to_string(combinations) + " combinations (" + strings::join(sizes, " x ") +
                   ") are more than the " + std::to_string(kMaxCombinations) +
                   " the tuner tries; shorten the lists");
}

std::string absolute_dir(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::absolute(dir.empty() ? fs::path(".") : fs::path(dir), ec);
  if (ec) return dir;
  std::string out = p.lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

}  // namespace

bool names_program(std::string_view yaml_text) {
  std::vector<Problem> not_yaml;  // the parser that gets the text says what is wrong with it
  const auto root = internal::load_document(yaml_text, "", &not_yaml);
  if (!root || !root->IsMap()) return false;
  for (auto it = root->begin(); it != root->end(); ++it)
    if (it->first.IsScalar() && it->first.Scalar() == "program") return true;
  return false;
}

ProgramParseOutcome parse_program_recipe(std::string_view yaml_text, const std::string& file,
                                         const std::string& base_dir) {
  ProgramParseOutcome out;
  const auto root = internal::load_document(yaml_text, file, &out.problems);
  if (!root) return out;
  SourceMap where;
  YamlReader r(file, &out.problems, &where);
  ProgramRecipe& recipe = out.recipe;
  recipe.name = internal::default_name(file, "program");
  recipe.source_path = file;
  recipe.source_dir = absolute_dir(base_dir);
  Context c{r, out.problems, {}};
  try {
    parse_document(c, *root, &recipe);
    check_placeholders(c, recipe);
    check_search(c, where, recipe);
  } catch (const std::exception& e) {  // not expected: the reader never converts with as<>
    out.problems.push_back({file, 0, 0, "recipe", std::string("cannot read: ") + e.what()});
  }
  internal::sort_problems(&out.problems);
  return out;
}

ProgramParseOutcome parse_program_recipe_file(const std::string& path) {
  auto text = paths::read_file(path);
  if (!text) {
    ProgramParseOutcome out;
    out.problems.push_back({path, 0, 0, "recipe", text.error().message()});
    return out;
  }
  const fs::path dir = fs::path(path).parent_path();
  return parse_program_recipe(*text, path, dir.empty() ? "." : dir.string());
}

Result<ProgramRecipe> load_program_recipe(const std::string& path_or_name) {
  auto path = resolve_recipe_path(path_or_name);
  if (!path) return std::move(path).error();
  ProgramParseOutcome parsed = parse_program_recipe_file(*path);
  if (parsed.ok()) return std::move(parsed.recipe);
  return invalid_input(internal::problems_text(parsed.problems));
}

}  // namespace dltune::recipes
