// report.html's predicted scaling curve: the models' scaling efficiency and throughput of this
// job's per-rank work from 1 to 1,024 nodes (launcher/launch_prediction.h computes it).
#include "launcher/report/report.h"
#include "launcher/report/svg_chart.h"

namespace dltune::report {

std::string scaling_section(const ReportData& d) {
  std::string body;
  if (d.predicted_scaling.empty()) {
    body = "<p class=\"empty\">No prediction was made for this run.</p>\n";
  } else {
    LineChart eff;
    eff.title = "Predicted scaling efficiency";
    eff.x_label = "nodes";
    eff.y_label = "efficiency (%)";
    eff.x_scale = AxisScale::kLog10;
    Series e{"efficiency", {}, {}};
    LineChart tput;
    tput.title = "Predicted throughput";
    tput.x_label = "nodes";
    tput.y_label = "samples/s";
    tput.x_scale = AxisScale::kLog10;
    tput.y_scale = AxisScale::kLog10;
    Series t{"throughput", {}, {}};
    for (const ScalingPoint& p : d.predicted_scaling) {
      e.points.emplace_back(p.nodes, 100 * p.efficiency);
      t.points.emplace_back(p.nodes, p.throughput_sps);
    }
    eff.series.push_back(std::move(e));
    tput.series.push_back(std::move(t));
    body = "<p>" + xml_escape(d.scaling_note) + "</p>\n" + render_svg(eff) + render_svg(tput);
  }
  return "<section><h2>Predicted scaling</h2>\n" + body + "</section>\n";
}

}  // namespace dltune::report
