#include "launcher/report/program_report.h"

#include <algorithm>
#include <map>
#include <vector>

#include "launcher/flow/text_format.h"
#include "launcher/report/svg_chart.h"

namespace dltune::report {
namespace {

using json = nlohmann::json;
namespace text = launcher::text;

constexpr const char* kStyle =
    R"(body{font:14px/1.45 system-ui,sans-serif;margin:24px 32px;color:#222}
h1{font-size:22px;margin:0 0 8px}h2{font-size:17px;margin:32px 0 8px}
table{border-collapse:collapse}td,th{padding:3px 14px 3px 0;text-align:left;vertical-align:top}
th{color:#555;font-weight:600;white-space:nowrap}.failed{color:#b22}
.chart{width:100%;height:auto;display:block;background:#fff;max-width:1000px}
.chart .title{font-weight:600;font-size:14px}.chart .label,.chart .value{font-size:12px;fill:#444}
.chart .empty{fill:#888;font-style:italic}.note{color:#555;max-width:1000px})";

std::string field(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return "unknown";
  const json& v = j[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number() || v.is_boolean()) return v.dump();
  return "unknown";
}

std::string row(const std::string& name, const std::string& value) {
  return "<tr><th>" + xml_escape(name) + "</th><td>" + xml_escape(value) + "</td></tr>\n";
}

// The candidates' bars (each one's best measured samples/s) and the trials' table.
std::string trials_section(const json& trials) {
  std::map<std::string, double> best;  // candidate -> best samples/s of a trial that ran
  std::vector<std::string> order;      // candidates in the order they were first tried
  for (const json& t : trials) {
    const std::string c = field(t, "candidate");
    if (std::find(order.begin(), order.end(), c) == order.end()) order.push_back(c);
    const bool failed = t.is_object() && t.value("failed", false);
    if (!failed) best[c] = std::max(best[c], text::num(t, "samples_per_s"));
  }
  std::vector<Bar> bars;
  for (const std::string& c : order) {
    Bar b;
    b.label = c;
    b.value = best.count(c) != 0 ? best[c] : 0;
    if (best.count(c) == 0) b.note = "failed";
    bars.push_back(b);
  }
  std::string o = "<section><h2>The candidates</h2>\n";
  o += "<p class=\"note\">Each candidate's best trial (the halving search measures the promising "
       "ones again in later rounds); a candidate that failed has no bar, and the table says "
       "why.</p>\n";
  o += render_bars("candidates", "samples/s per candidate (best trial)", bars, "samples/s", 1000);
  o += "<table>\n<tr><th>candidate</th><th>round</th><th>steps</th><th>samples/s</th>"
       "<th>seconds</th><th>outcome</th></tr>\n";
  for (const json& t : trials) {
    const bool failed = t.is_object() && t.value("failed", false);
    o += std::string("<tr") + (failed ? " class=\"failed\"" : "") + "><td>" +
         xml_escape(field(t, "candidate")) + "</td><td>" + xml_escape(field(t, "round")) +
         "</td><td>" + xml_escape(field(t, "steps")) + "</td><td>" +
         (failed ? "" : text::fixed(text::num(t, "samples_per_s"), 1)) + "</td><td>" +
         text::fixed(text::num(t, "wall_s"), 1) + "</td><td>" +
         xml_escape(failed ? "failed: " + field(t, "reason") : "measured") + "</td></tr>\n";
  }
  return o + "</table>\n</section>\n";
}

// The screening model's part (tuner/screening.h): what it measured first and what it set
// aside, with its predictions.
std::string screening_section(const json& sc) {
  std::string o =
      "<section><h2>Screening</h2>\n<p class=\"note\">" + xml_escape(field(sc, "note")) + "</p>\n";
  const json aside = sc.contains("set_aside") ? sc["set_aside"] : json();
  if (!aside.is_array() || aside.empty()) return o + "</section>\n";
  o += "<table>\n<tr><th>set aside unmeasured</th><th>predicted samples/s</th></tr>\n";
  for (const json& a : aside) {
    o += "<tr><td>" + xml_escape(field(a, "candidate")) + "</td><td>" +
         text::fixed(text::num(a, "predicted_sps"), 1) + "</td></tr>\n";
  }
  return o + "</table>\n</section>\n";
}

}  // namespace

std::string render_program_report_html(const json& s) {
  const std::string name = field(s, "recipe");
  std::string o = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" +
                  xml_escape("dltune: " + name) + "</title>\n<style>" + kStyle +
                  "</style></head><body>\n";
  o += "<h1>" + xml_escape(name + ": your program, tuned and run by dltune") + "</h1>\n";
  const double sps = text::num(s, "throughput_sps");
  const json values = s.is_object() && s.contains("values") ? s["values"] : json();
  o += "<section><h2>The run</h2>\n<table>\n";
  o += row("throughput", sps > 0 ? text::fixed(sps, 1) + " samples/s"
                                 : "not reported (" + field(s, "throughput_error") + ")");
  o += row("run", text::fixed(text::num(s, "run_seconds"), 1) + " s, exit code " +
                      field(s, "exit_code") + " (" + text::fixed(text::num(s, "wall_seconds"), 1) +
                      " s with the tuning)");
  o += row("plan", field(s, "plan_source"));
  o += row("settings", "batch " + field(values, "batch") + ", " + field(values, "ranks") +
                           " rank(s), " + field(values, "ranks_per_node") + " per node x " +
                           field(values, "threads_per_rank") + " thread(s), bucket " +
                           field(values, "bucket_mb") + " MB");
  o += row("why", field(s, "reason"));
  o += row("run directory", field(s, "run_dir"));
  o += row("the program's output", field(s, "output"));
  o += "</table>\n</section>\n";
  if (s.is_object() && s.contains("trials") && s["trials"].is_array() && !s["trials"].empty()) {
    o += trials_section(s["trials"]);
    if (s.contains("screening") && s["screening"].is_object())
      o += screening_section(s["screening"]);
  } else {
    o += "<section><h2>The candidates</h2>\n<p class=\"note\">" +
         xml_escape("No tuning in this launch: the plan was " + field(s, "plan_source") + ".") +
         "</p>\n</section>\n";
  }
  return o + "</body></html>\n";
}

}  // namespace dltune::report
