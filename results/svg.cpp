// SVG charts: layout constants, 1-2-5 ticks, axes, legends and the three chart kinds.
#include "results/svg.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <map>

namespace clustersim::results {
namespace {

constexpr double width = 880, height = 500;
constexpr double left = 90, right = 270, top = 50, bottom = 70;  // room for labels and a legend of ~30 characters
constexpr double plot_w = width - left - right, plot_h = height - top - bottom;
// A colour-blind-safe palette (Okabe-Ito), cycled.
constexpr const char* palette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string number(double v) {
  if (v == 0) return "0";
  const double a = std::abs(v);
  if (a >= 1e6 || a < 1e-3) return fmt::format("{:.3g}", v);
  return fmt::format("{:.6g}", v);
}

struct Scale {
  double lo, hi, pixel_lo, pixel_hi;
  bool log = false;
  double operator()(double v) const {
    const double t = log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : (v - lo) / (hi - lo);
    return pixel_lo + t * (pixel_hi - pixel_lo);
  }
};

std::pair<double, double> padded(double lo, double hi) {
  if (!(lo < hi)) {
    const double d = lo == 0 ? 1 : std::abs(lo) * 0.1;
    return {lo - d, hi + d};
  }
  return {lo, hi};
}

// A long title (a sweep name plus two axis pointers) shrinks to fit the width; a bold
// sans-serif character is about 0.6 em wide.
double title_size(const std::string& title) {
  const double fit = (width - 20) / (0.6 * static_cast<double>(std::max<std::size_t>(title.size(), 1)));
  return std::clamp(fit, 9.0, 16.0);
}

std::string header(const ChartText& t) {
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"28\" font-size=\"{3:.1f}\" font-weight=\"bold\" text-anchor=\"middle\">{4}</text>\n",
      width, height, width / 2, title_size(t.title), escape(t.title));
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", left + plot_w / 2, height - 20,
                   escape(t.x_label));
  s += fmt::format("<text x=\"20\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 20 {0})\">{1}</text>\n",
                   top + plot_h / 2, escape(t.y_label));
  return s;
}

std::string frame() {
  return fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n", left, top,
                     plot_w, plot_h);
}

std::string x_ticks(const Scale& x, const std::vector<double>& ticks) {
  std::string s;
  for (double t : ticks) {
    const double px = x(t);
    s += fmt::format("<line x1=\"{0:.2f}\" y1=\"{1}\" x2=\"{0:.2f}\" y2=\"{2}\" stroke=\"#ddd\"/>\n", px, top, top + plot_h);
    s += fmt::format("<text x=\"{:.2f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", px, top + plot_h + 18, number(t));
  }
  return s;
}

std::string y_ticks(const Scale& y, const std::vector<double>& ticks) {
  std::string s;
  for (double t : ticks) {
    const double py = y(t);
    s += fmt::format("<line x1=\"{1}\" y1=\"{0:.2f}\" x2=\"{2}\" y2=\"{0:.2f}\" stroke=\"#ddd\"/>\n", py, left, left + plot_w);
    s += fmt::format("<text x=\"{}\" y=\"{:.2f}\" text-anchor=\"end\">{}</text>\n", left - 6, py + 4, number(t));
  }
  return s;
}

std::string legend(const std::vector<std::pair<std::string, std::string>>& entries) {  // (name, colour)
  std::string s;
  double y = top + 10;
  for (const auto& [name, colour] : entries) {
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"10\" fill=\"{}\"/>\n", left + plot_w + 15, y - 9,
                     colour);
    s += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", left + plot_w + 35, y, escape(name));
    y += 18;
  }
  return s;
}

std::vector<double> log_ticks(double lo, double hi) {
  std::vector<double> out;
  for (double d = std::pow(10.0, std::floor(std::log10(lo))); d <= hi * 1.0000001; d *= 10)
    for (double m : {1.0, 2.0, 5.0})
      if (d * m >= lo * 0.9999999 && d * m <= hi * 1.0000001) out.push_back(d * m);
  return out;
}

// A point with an infinite or NaN coordinate has no place on a chart (an infinite
// iteration time once sent the tick loop to infinity): the callers say how many they left
// out, the charts skip them.
bool drawable(double x, double y) { return std::isfinite(x) && std::isfinite(y); }

struct Bounds {
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  void add(double x, double y) {
    if (!drawable(x, y)) return;
    x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x), y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
  }
  bool empty() const { return !(x_lo <= x_hi); }
};

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {std::isfinite(lo) ? lo : 0.0};
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag * 1.0000001) {
      step = m * mag;
      break;
    }
  std::vector<double> out;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step)
    out.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  return out;
}

std::string line_chart(const ChartText& text, const std::vector<Series>& series, bool log_x) {
  Bounds b;
  for (const auto& s : series)
    for (const auto& [x, y] : s.points)
      if (!log_x || x > 0) b.add(x, y);
  if (b.empty()) b.add(0, 0), b.add(1, 1);
  auto [xl, xh] = padded(b.x_lo, b.x_hi);
  if (log_x && b.x_lo == b.x_hi) xl = b.x_lo / 2, xh = b.x_hi * 2;
  // Throughput and time charts read best from zero.
  const double y_lo = std::min(0.0, b.y_lo);
  auto [yl, yh] = padded(y_lo, b.y_hi * 1.05);
  const auto yt = nice_ticks(yl, yh);
  yh = std::max(yh, yt.back());
  const Scale x{xl, xh, left, left + plot_w, log_x}, y{yl, yh, top + plot_h, top};
  std::string svg = header(text) + x_ticks(x, log_x ? log_ticks(xl, xh) : nice_ticks(xl, xh)) + y_ticks(y, yt);
  std::vector<std::pair<std::string, std::string>> entries;
  for (std::size_t i = 0; i < series.size(); ++i) {
    const char* colour = palette[i % std::size(palette)];
    auto pts = series[i].points;
    std::sort(pts.begin(), pts.end());
    std::string path;
    for (const auto& [px, py] : pts) {
      if ((log_x && px <= 0) || !drawable(px, py)) continue;
      path += fmt::format("{}{:.2f},{:.2f}", path.empty() ? "" : " ", x(px), y(py));
    }
    svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", colour, path);
    for (const auto& [px, py] : pts)
      if ((!log_x || px > 0) && drawable(px, py))
        svg += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"3\" fill=\"{}\"/>\n", x(px), y(py), colour);
    entries.emplace_back(series[i].name, colour);
  }
  return svg + frame() + legend(entries) + "</svg>\n";
}

std::string scatter_chart(const ChartText& text, const std::vector<Series>& series, bool identity_line) {
  Bounds b;
  for (const auto& s : series)
    for (const auto& [x, y] : s.points) b.add(x, y);
  if (b.empty()) b.add(0, 0), b.add(1, 1);
  double xl = std::min(0.0, b.x_lo), xh = b.x_hi * 1.05, yl = std::min(0.0, b.y_lo), yh = b.y_hi * 1.05;
  if (identity_line) xl = yl = std::min(xl, yl), xh = yh = std::max(xh, yh);
  std::tie(xl, xh) = padded(xl, xh);
  std::tie(yl, yh) = padded(yl, yh);
  const Scale x{xl, xh, left, left + plot_w}, y{yl, yh, top + plot_h, top};
  std::string svg = header(text) + x_ticks(x, nice_ticks(xl, xh)) + y_ticks(y, nice_ticks(yl, yh));
  std::vector<std::pair<std::string, std::string>> entries;
  if (identity_line) {
    const double lo = std::max(xl, yl), hi = std::min(xh, yh);
    svg += fmt::format("<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"#888\" "
                       "stroke-dasharray=\"6 4\"/>\n",
                       x(lo), y(lo), x(hi), y(hi));
    entries.emplace_back("y = x (perfect prediction)", "#888");
  }
  for (std::size_t i = 0; i < series.size(); ++i) {
    const char* colour = palette[i % std::size(palette)];
    for (const auto& [px, py] : series[i].points)
      if (drawable(px, py))
        svg += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"4\" fill=\"{}\" fill-opacity=\"0.8\"/>\n", x(px),
                         y(py), colour);
    entries.emplace_back(series[i].name, colour);
  }
  return svg + frame() + legend(entries) + "</svg>\n";
}

std::string gantt_chart(const ChartText& text, const std::vector<TimelineBar>& bars) {
  int rows = 1;
  double t_end = 0;
  std::vector<std::string> kinds;
  for (const auto& b : bars) {
    rows = std::max(rows, b.row + 1);
    t_end = std::max(t_end, b.end);
    if (std::find(kinds.begin(), kinds.end(), b.kind) == kinds.end()) kinds.push_back(b.kind);
  }
  if (t_end <= 0) t_end = 1;
  const Scale x{0, t_end, left, left + plot_w};
  std::string svg = header(text) + x_ticks(x, nice_ticks(0, t_end));
  const double row_h = plot_h / rows;
  for (int r = 0; r < rows; ++r)
    svg += fmt::format("<text x=\"{}\" y=\"{:.2f}\" text-anchor=\"end\">GPU {}</text>\n", left - 6,
                       top + (r + 0.5) * row_h + 4, r);
  std::map<std::string, std::string> colour;
  std::vector<std::pair<std::string, std::string>> entries;
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    colour[kinds[i]] = palette[i % std::size(palette)];
    entries.emplace_back(kinds[i], colour[kinds[i]]);
  }
  for (const auto& b : bars)
    svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"><title>GPU {} "
                       "{} {}-{} s</title></rect>\n",
                       x(b.start), top + b.row * row_h + row_h * 0.15, std::max(0.5, x(b.end) - x(b.start)),
                       row_h * 0.7, colour[b.kind], b.row, escape(b.kind), number(b.start), number(b.end));
  return svg + frame() + legend(entries) + "</svg>\n";
}

}  // namespace clustersim::results
