// A small SVG chart writer (no dependency): line charts of a metric against a sweep
// axis, scatter charts of predicted against measured with the y = x line, and per-GPU
// timelines (Gantt). Every chart has a title, axis labels (the caller puts the unit in
// them), ticks at 1-2-5 steps and a legend. Output is deterministic text.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace clustersim::results {

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in x order
};

struct ChartText {
  std::string title, x_label, y_label;
};

// Points with a non-finite coordinate are left out of every chart (callers report them).
// One polyline with markers per series.
std::string line_chart(const ChartText& text, const std::vector<Series>& series, bool log_x = false);
// Markers only; with `identity_line` the y = x diagonal is drawn and both axes share a range.
std::string scatter_chart(const ChartText& text, const std::vector<Series>& series, bool identity_line);

struct TimelineBar {
  int row = 0;              // GPU index
  double start = 0, end = 0;  // seconds
  std::string kind;         // colour and legend entry ("forward", "backward", "allreduce"...)
};
// Rows are GPUs (labelled "GPU 0"...), x is time; kinds get colours in order of first appearance.
std::string gantt_chart(const ChartText& text, const std::vector<TimelineBar>& bars);

// Tick positions covering [lo, hi] at 1, 2 or 5 x 10^k steps (about `target` of them).
std::vector<double> nice_ticks(double lo, double hi, int target = 6);

}  // namespace clustersim::results
