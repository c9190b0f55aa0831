// The SVG writer: 1-2-5 ticks, titles, axis labels, legends, escaping, the y = x line,
// Gantt bars placed at their times, and byte-identical output for identical input.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <limits>

#include "results/svg.hpp"

using namespace clustersim::results;

namespace {
std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}
void check_ticks(double lo, double hi, int target, double step) {
  const auto t = nice_ticks(lo, hi, target);
  INFO("range [" << lo << ", " << hi << "], expected step " << step);
  REQUIRE(t.size() >= 2);
  const double first = std::ceil(lo / step - 1e-9) * step;
  CHECK(t.front() == Approx(first));
  for (std::size_t i = 1; i < t.size(); ++i) CHECK(t[i] - t[i - 1] == Approx(step));
  CHECK(t.back() <= hi + step * 1e-6);
  CHECK(t.back() + step > hi);
}
}  // namespace

TEST_CASE("ticks fall on 1, 2 and 5 times a power of ten and cover the range", "[svg]") {
  CHECK(nice_ticks(0, 10, 5) == std::vector<double>{0, 2, 4, 6, 8, 10});
  check_ticks(0, 1, 5, 0.2);        // raw step 0.2
  check_ticks(0, 7, 6, 2);          // raw 1.17 -> 2
  check_ticks(3, 48, 6, 10);        // raw 7.5 -> 10
  check_ticks(0, 351099, 6, 100000);  // raw 58,517 -> 100,000
  check_ticks(-0.3, 0.3, 6, 0.1);
  CHECK(nice_ticks(5, 5).size() == 1);
}

TEST_CASE("a line chart has its title, labels, one polyline and legend entry per series", "[svg]") {
  const std::vector<Series> series{{"pp=1", {{1, 10}, {2, 20}, {4, 30}}}, {"pp=2 <&>", {{1, 8}, {4, 12}}}};
  const ChartText text{"tokens against tp", "/plan/tp", "throughput (tokens/s)"};
  const std::string svg = line_chart(text, series);
  CHECK_THAT(svg, Catch::StartsWith("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  CHECK_THAT(svg, Catch::EndsWith("</svg>\n"));
  CHECK_THAT(svg, Catch::Contains(">tokens against tp<") && Catch::Contains(">/plan/tp<") &&
                      Catch::Contains(">throughput (tokens/s)<") && Catch::Contains(">pp=1<") &&
                      Catch::Contains(">pp=2 &lt;&amp;&gt;<"));
  CHECK(count(svg, "<polyline") == 2);
  CHECK(count(svg, "<circle") == 5);
  CHECK(svg == line_chart(text, series));  // deterministic
  CHECK(line_chart(text, series, true).find("<polyline") != std::string::npos);
}

TEST_CASE("predicted against measured draws y = x across a shared range", "[svg]") {
  const std::string svg = scatter_chart({"p vs m", "measured (s)", "predicted (s)"}, {{"h100", {{1, 1.1}, {2, 1.8}}}}, true);
  CHECK_THAT(svg, Catch::Contains("y = x") && Catch::Contains("stroke-dasharray"));
  CHECK(count(svg, "<circle") == 2);
  // The diagonal goes from the bottom-left to the top-right corner of the plot area.
  CHECK_THAT(svg, Catch::Contains("<line x1=\"90.00\" y1=\"430.00\" x2=\"610.00\" y2=\"50.00\""));
}

TEST_CASE("a Gantt chart puts one bar per event in its GPU's row at its times", "[svg]") {
  const std::vector<TimelineBar> bars{{0, 0.0, 1.0, "forward"}, {1, 0.5, 1.5, "forward"}, {1, 1.5, 2.0, "allreduce"}};
  const std::string svg = gantt_chart({"timeline", "time (s)", "GPU"}, bars);
  CHECK(count(svg, "<title>GPU") == 3);
  CHECK_THAT(svg, Catch::Contains(">GPU 0<") && Catch::Contains(">GPU 1<") && Catch::Contains(">forward<") &&
                      Catch::Contains(">allreduce<") && Catch::Contains(">time (s)<"));
  // x = 90 + t / 2.0 * 520: the second bar starts at 0.5 s -> 220 px, 1 s long -> 260 px wide.
  const double x = 90 + 0.5 / 2.0 * 520, w = 1.0 / 2.0 * 520;
  char expect_x[64], expect_w[64];
  std::snprintf(expect_x, sizeof expect_x, "<rect x=\"%.2f\"", x);
  std::snprintf(expect_w, sizeof expect_w, "width=\"%.2f\"", w);
  INFO("expected a bar at " << expect_x << " " << expect_w);
  CHECK_THAT(svg, Catch::Contains(std::string(expect_x)) && Catch::Contains(std::string(expect_w)));
}

TEST_CASE("points with an infinite or NaN coordinate are left out, not drawn or crashed on", "[svg]") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(nice_ticks(0, inf).size() == 1);
  CHECK(nice_ticks(-inf, inf).size() == 1);
  const std::vector<Series> series{{"a", {{1, 2}, {2, inf}, {3, 4}, {nan, 1}}}, {"b", {{1, inf}}}};
  for (const std::string& svg : {line_chart({"t", "x", "y"}, series), line_chart({"t", "x", "y"}, series, true),
                                 scatter_chart({"t", "x", "y"}, series, true)}) {
    CHECK_THAT(svg, Catch::EndsWith("</svg>\n") && !Catch::Contains("inf") && !Catch::Contains("nan"));
    std::size_t circles = 0;
    for (auto pos = svg.find("<circle"); pos != std::string::npos; pos = svg.find("<circle", pos + 1)) ++circles;
    CHECK(circles == 2);
  }
}
