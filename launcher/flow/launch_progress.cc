#include "launcher/flow/launch_progress.h"

#include <cmath>
#include <cstdio>

#include "common/strings.h"
#include "launcher/flow/text_format.h"

namespace dltune::launcher {
namespace {

using json = nlohmann::json;

std::string str(const json& e, const char* key) {
  auto it = e.find(key);
  return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
}

long integer(const json& e, const char* key) {
  auto it = e.find(key);
  return it != e.end() && it->is_number() ? static_cast<long>(it->get<double>()) : 0;
}

double number(const json& e, const char* key) {
  auto it = e.find(key);
  return it != e.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::string of(long i, long n) { return std::to_string(i) + " of " + std::to_string(n); }

}  // namespace

std::string status_text(const json& e) {
  const std::string ev = str(e, "event");
  if (ev == "sweep") {
    std::vector<std::string> algos;
    if (e.contains("algos") && e["algos"].is_array()) {
      for (const json& a : e["algos"]) {
        if (a.is_string()) algos.push_back(a.get<std::string>());
      }
    }
    return "size " + of(integer(e, "index") + 1, integer(e, "count")) + " (" +
           strings::format_bytes(static_cast<uint64_t>(number(e, "bytes"))) +
           "): " + strings::join(algos, ", ");
  }
  if (ev == "trial_start") {
    return std::to_string(integer(e, "candidates")) + " candidates, " +
           std::to_string(integer(e, "rounds")) + " round(s) of successive halving planned";
  }
  if (ev == "trial_build") {
    return "round " + std::to_string(integer(e, "round") + 1) + ": setting up " + str(e, "label") +
           " (model, data, a warm-up step)";
  }
  if (ev == "trial_chunk") {
    // The counts first: a narrow terminal cuts the end of the line, and the labels are long.
    std::string s = "round " + of(integer(e, "round") + 1, integer(e, "rounds")) + ", candidate " +
                    of(integer(e, "position"), integer(e, "field")) + ", step " +
                    of(integer(e, "steps_done"), integer(e, "steps")) + ": " + str(e, "label");
    // The halving's current leader at its mean rate over the steps it ran: an estimate that
    // settles as steps accrue, so it may fall, and the lead may change (issue 42: "best so
    // far" read as a record that fell).
    if (!str(e, "best").empty()) {
      s += "; leading " + str(e, "best") + " at " + text::thousands(number(e, "best_sps")) +
           " samples/s";
    }
    return s;
  }
  if (ev == "trial_skip") return str(e, "label") + ": not measured (the budget ran out)";
  if (ev == "trial_compare") {
    char buf[160];
    if (e.contains("hi") && e["hi"].is_number()) {
      std::snprintf(buf, sizeof buf, "%.2fx (95 %% interval %.2f-%.2f, %ld rounds)",
                    number(e, "ratio"), number(e, "lo"), number(e, "hi"), integer(e, "rounds"));
    } else {
      std::snprintf(buf, sizeof buf, "%.2fx (%ld rounds)", number(e, "ratio"),
                    integer(e, "rounds"));
    }
    return "finalists " + str(e, "a") + " vs " + str(e, "b") + ": " + buf;
  }
  if (ev == "status") return str(e, "text");
  return "";
}

void show_rank_event(Progress& progress, const json& e) {
  const std::string text = status_text(e);
  if (text.empty()) return;
  json fields = e;
  fields["rank_event"] = str(e, "event");
  fields.erase("event");
  progress.status(text, fields);
}

// ---- MetricsFollower

MetricsFollower::MetricsFollower(std::string path, long total_steps, Progress* progress)
    : progress_(progress),
      follower_(std::move(path), [this](const nlohmann::json& e) { on_event(e); }) {
  state_.total = total_steps;
}

std::optional<std::chrono::steady_clock::time_point> MetricsFollower::first_step_at() const {
  const int64_t ns = first_step_ns_.load();
  if (ns == 0) return std::nullopt;
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

void MetricsFollower::on_event(const nlohmann::json& j) {
  using text::num;
  const std::string ev = j.value("event", "");
  if (ev == "step" && first_step_ns_.load() == 0) {
    first_step_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now().time_since_epoch())
                         .count();
  }
  if (progress_ == nullptr) return;
  if (ev == "step") {
    state_.step = static_cast<long>(num(j, "step")) + 1;
    state_.loss = num(j, "loss", -1);
    state_.samples_per_s = num(j, "samples_per_s");
    progress_->update(state_);
  } else if (ev == "eval") {
    state_.accuracy = num(j, "heldout_accuracy", -1);
    progress_->event("eval", {{"step", static_cast<long>(num(j, "step"))},
                              {"accuracy", state_.accuracy},
                              {"loss", num(j, "heldout_loss", -1)}});
    if (state_.step > 0) progress_->update(state_);
  } else if (ev == "status") {
    show_rank_event(*progress_, j);
  }
}

}  // namespace dltune::launcher
