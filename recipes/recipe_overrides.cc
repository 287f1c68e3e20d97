#include "recipes/recipe_overrides.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>

#include <yaml-cpp/yaml.h>

#include "common/paths.h"
#include "common/strings.h"
#include "recipes/recipe_parse_internal.h"
#include "recipes/yaml_reader.h"

namespace dltune::recipes {
namespace {

// A copy of `src` made of new nodes: no position marks (so problems in it are not located at
// line 1 of the one-line document it was loaded from), tags and flow style kept.
YAML::Node unmarked(const YAML::Node& src) {
  switch (src.Type()) {
    case YAML::NodeType::Scalar: {
      YAML::Node n(src.Scalar());
      n.SetTag(src.Tag());
      return n;
    }
    case YAML::NodeType::Sequence: {
      YAML::Node n(YAML::NodeType::Sequence);
      for (const YAML::Node& item : src) n.push_back(unmarked(item));
      n.SetStyle(src.Style());
      return n;
    }
    case YAML::NodeType::Map: {
      YAML::Node n(YAML::NodeType::Map);
      for (const auto& kv : src) n[unmarked(kv.first)] = unmarked(kv.second);
      n.SetStyle(src.Style());
      return n;
    }
    default:
      return YAML::Node(YAML::NodeType::Null);
  }
}

// The key a shorthand scalar stands for, by the path of the mapping it abbreviates.
const std::map<std::string, std::string>& shorthands() {
  static const std::map<std::string, std::string> m = {
      {"data", "kind"}, {"model", "builtin"}, {"training.schedule", "kind"}};
  return m;
}

bool valid_key_part(std::string_view p) {
  if (p.empty()) return false;
  for (char c : p) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

// Applies one override to `root` (a mapping). Error: one sentence for a problem of its own.
Status apply(YAML::Node& root, const Override& o) {
  const std::vector<std::string> parts = strings::split(o.key, '.');
  YAML::Node cur;
  cur.reset(root);
  std::string path;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    path += (path.empty() ? "" : ".") + parts[i];
    YAML::Node next = cur[parts[i]];
    if (!next || next.IsNull()) {
      cur[parts[i]] = YAML::Node(YAML::NodeType::Map);
    } else if (next.IsScalar()) {
      auto sh = shorthands().find(path);
      if (sh != shorthands().end()) {
        YAML::Node m(YAML::NodeType::Map);
        m[sh->second] = unmarked(next);
        cur[parts[i]] = m;
      } else if (path == "training.batch" && next.Scalar() == "auto") {
        cur[parts[i]] = YAML::Node(YAML::NodeType::Map);
      } else {
        return invalid_input(path + " is a value ('" + next.Scalar() +
                             "'), not a section with keys");
      }
    } else if (!next.IsMap()) {
      return invalid_input(path + " is a list, not a section with keys");
    }
    YAML::Node child = cur[parts[i]];
    cur.reset(child);
  }
  YAML::Node value;
  try {
    value = YAML::Load(o.value);
  } catch (const YAML::Exception& e) {
    return invalid_input("the value is not YAML (" + e.msg + ")");
  }
  cur[parts.back()] = unmarked(value);
  // A run's length is given one way: setting steps replaces the file's epochs and vice versa
  // (issue 42: `--set training.steps=40` on an epochs-based recipe).
  if (path == "training" && (parts.back() == "steps" || parts.back() == "epochs"))
    cur.remove(parts.back() == "steps" ? "epochs" : "steps");
  return ok_status();
}

// Whether problem key `key` lies at or below override key `o`.
bool under(const std::string& key, const std::string& o) {
  return key == o || (key.size() > o.size() && key.starts_with(o) &&
                      (key[o.size()] == '.' || key[o.size()] == '['));
}

Result<YAML::Node> load_document(const std::string& path) {
  auto text = paths::read_file(path);
  if (!text) return text.error();
  // A file the bounds refuse is not loaded here: the caller's parse_recipe_file() reports it.
  if (auto problem = precheck_yaml(*text, path)) return invalid_input(problem->to_string());
  try {
    YAML::Node root = YAML::Load(*text);
    if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
    return root;
  } catch (const YAML::Exception& e) {
    return invalid_input(path + ": YAML syntax error: " + e.msg);
  }
}

std::string dir_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  return dir.empty() ? "/" : dir;
}

// The last part of a key path: "training.steps" -> "steps".
std::string leaf(const std::string& key) {
  const size_t dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

// Whether `word` occurs in `text` as a whole word (not inside "warmup_steps").
bool mentions(const std::string& text, const std::string& word) {
  auto part = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const bool before = at == 0 || !part(text[at - 1]);
    const size_t end = at + word.size();
    if (before && (end == text.size() || !part(text[end]))) return true;
  }
  return false;
}

// An integer scalar at `node`, else nullopt.
std::optional<int64_t> int_at(const YAML::Node& node) {
  if (!node || !node.IsScalar()) return std::nullopt;
  try {
    return node.as<int64_t>();
  } catch (const YAML::Exception&) {
    return std::nullopt;
  }
}

// A run made shorter by --set: the file's settings counted in steps.
//
// `--set training.steps=40` on a recipe that checkpoints every 100 steps, warms up for 50 or
// decays every 1000 would be refused (none of them fits a 40-step run). A newcomer shortening a
// run means "the same run, shorter", so each such setting of the file that the new length no
// longer fits, and that no override sets itself, takes the share of the run it had in the file
// (when the file gives its length in steps: 100 of 300 -> 13 of 40), else the share a recipe
// without it gets (checkpoints: a quarter of the run, the default; warm-up: 5 %; a step decay:
// half). One note says what changed.
struct StepSetting {
  const char* section;  // "training" or "training.schedule"
  const char* key;
  bool inclusive;                  // fits when value <= steps (checkpoints) rather than < steps
  int64_t numerator, denominator;  // the share of the run when the file's length is in epochs
  const char* share;               // that share in words
};
constexpr StepSetting kStepSettings[] = {
    {"training", "checkpoint_every", true, 1, 4, "a quarter of the run, the default"},
    {"training.schedule", "warmup_steps", false, 1, 20, "5 % of the run"},
    {"training.schedule", "step_size", false, 1, 2, "half the run"},
};

void fit_to_length(YAML::Node& root, int64_t file_steps, const std::vector<Override>& overrides,
                   std::vector<std::string>* notes) {
  const Override* length = nullptr;
  for (const Override& o : overrides) {
    if (o.key == "training.steps" || o.key == "training.epochs") length = &o;
  }
  if (length == nullptr || length->key != "training.steps") return;
  YAML::Node training = root["training"];
  if (!training.IsMap()) return;
  const std::optional<int64_t> steps = int_at(training["steps"]);
  if (!steps || *steps < 1) return;  // the parser says what is wrong with it
  std::vector<std::string> changed;
  for (const StepSetting& s : kStepSettings) {
    const std::string path = std::string(s.section) + "." + s.key;
    bool set_by_override = false;
    for (const Override& o : overrides) set_by_override |= under(path, o.key);
    if (set_by_override) continue;
    YAML::Node section = s.section == std::string("training") ? training : training["schedule"];
    if (!section.IsMap()) continue;
    const std::optional<int64_t> value = int_at(section[s.key]);
    if (!value || *value < 1) continue;
    if (s.inclusive ? *value <= *steps : *value < *steps) continue;
    // (In double: a count and a length may each be near int64's range.)
    const double share = file_steps > 0
                             ? static_cast<double>(*value) / static_cast<double>(file_steps)
                             : static_cast<double>(s.numerator) / s.denominator;
    if (share > 1) continue;  // it did not fit the file's own run either: the checks say so
    int64_t fitted = static_cast<int64_t>(std::floor(share * static_cast<double>(*steps)));
    if (std::string(s.key) != "warmup_steps") fitted = std::max<int64_t>(1, fitted);
    if (s.inclusive ? fitted > *steps : fitted >= *steps) continue;  // nothing fits: say why
    YAML::Node n(std::to_string(fitted));
    n.SetTag("?");  // a plain scalar, as if the file had it: a number, not a string
    section[s.key] = n;
    std::string what = path.substr(std::string("training.").size()) + " " + std::to_string(*value) +
                       " -> " + std::to_string(fitted);
    if (file_steps <= 0) what += std::string(" (") + s.share + ")";
    changed.push_back(what);
  }
  if (changed.empty() || notes == nullptr) return;
  std::string note = "--set " + length->text + ": the run is shorter than the file's schedule: " +
                     strings::join(changed, ", ");
  if (file_steps > 0)
    note += " (the share of the file's " + std::to_string(file_steps) + " steps each had)";
  notes->push_back(note);
}

// The file's training.steps, before any override (0 when it gives epochs).
int64_t file_steps_of(const YAML::Node& root) {
  const YAML::Node training = root["training"];
  if (!training.IsMap()) return 0;
  return int_at(training["steps"]).value_or(0);
}

}  // namespace

Result<Override> parse_override(std::string_view text) {
  const std::string t(text);
  const size_t eq = t.find('=');
  auto bad = [&](const std::string& why) {
    return invalid_input("--set '" + t + "': " + why +
                         "; give KEY=VALUE such as training.steps=10 or data.path=/data/cifar");
  };
  if (eq == std::string::npos) return bad("no '='");
  Override o{strings::trim(t.substr(0, eq)), strings::trim(t.substr(eq + 1)), t};
  if (o.key.empty()) return bad("the key is empty");
  if (o.value.empty()) return bad("the value is empty");
  for (const std::string& p : strings::split(o.key, '.')) {
    if (!valid_key_part(p)) return bad("'" + o.key + "' is not a key path (keys joined by '.')");
  }
  try {
    (void)YAML::Load(o.value);
  } catch (const YAML::Exception& e) {
    return bad("the value is not YAML (" + e.msg + ")");
  }
  return o;
}

ParseOutcome parse_recipe_with_overrides(const std::string& path,
                                         const std::vector<Override>& overrides,
                                         std::vector<std::string>* notes) {
  if (overrides.empty()) return parse_recipe_file(path);
  ParseOutcome out;
  auto root = load_document(path);
  if (!root) return parse_recipe_file(path);  // the file's own problem, located
  if (!root->IsMap()) return parse_recipe_file(path);
  const int64_t file_steps = file_steps_of(*root);
  for (const Override& o : overrides) {
    if (Status s = apply(*root, o); !s.ok()) {
      out.problems.push_back({"--set " + o.text, 0, 0, o.key, s.error().message()});
    }
  }
  if (!out.problems.empty()) return out;
  fit_to_length(*root, file_steps, overrides, notes);
  out = internal::parse_recipe_document(*root, path, dir_of(path));
  for (Problem& p : out.problems) {
    bool named = false;
    for (auto it = overrides.rbegin(); it != overrides.rend(); ++it) {
      if (!under(p.key, it->key)) continue;
      p.file = "--set " + it->text;
      p.line = p.column = 0;
      named = true;
      break;
    }
    if (named) continue;
    // A file key that an override made wrong (`--set training.steps=10` below the file's
    // checkpoint_every): say so, and how to change it too.
    for (auto it = overrides.rbegin(); it != overrides.rend(); ++it) {
      if (!mentions(p.message, leaf(it->key))) continue;
      p.message += " (with --set " + it->text + "; add --set " + p.key + "=... to change it too)";
      break;
    }
  }
  return out;
}

Result<Recipe> load_recipe_with_overrides(const std::string& path_or_name,
                                          const std::vector<Override>& overrides,
                                          std::vector<std::string>* notes) {
  if (overrides.empty()) return load_recipe(path_or_name);
  auto path = resolve_recipe_path(path_or_name);
  if (!path) return std::move(path).error();
  ParseOutcome parsed = parse_recipe_with_overrides(*path, overrides, notes);
  if (parsed.ok()) return std::move(parsed.recipe);
  std::vector<std::string> lines;
  for (const Problem& p : parsed.problems) lines.push_back(p.to_string());
  return invalid_input(strings::join(lines, "\n"));
}

Result<std::string> recipe_yaml_as_run(const std::string& path, const Recipe& recipe,
                                       const std::vector<Override>& overrides) {
  auto root = load_document(path);
  if (!root) return std::move(root).error();
  const int64_t file_steps = file_steps_of(*root);
  for (const Override& o : overrides) DLTUNE_TRY_CTX(apply(*root, o), "--set " + o.text);
  fit_to_length(*root, file_steps, overrides, nullptr);
  if (!(*root)["name"]) (*root)["name"] = recipe.name;  // not "recipe", from recipe.yaml
  YAML::Node data = (*root)["data"];
  if (!recipe.data.path.empty() && data.IsMap()) data["path"] = recipe.data.path;
  YAML::Node training = (*root)["training"];
  if (!recipe.training.init_from.empty() && training.IsMap()) {
    training["init_from"] = recipe.training.init_from;
  }
  YAML::Emitter e;
  e << *root;
  if (!e.good()) return internal_error("writing the recipe as run: " + e.GetLastError());
  std::string head = "# The recipe as run: " + path;
  for (const Override& o : overrides) head += "\n#   --set " + o.text;
  return head + "\n" + std::string(e.c_str()) + "\n";
}

}  // namespace dltune::recipes
