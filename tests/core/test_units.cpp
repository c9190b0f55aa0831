// Units: SI inside, spelled-out units at the edges, clear messages for the rest.
#include <catch2/catch.hpp>

#include "scenarios/units.hpp"

using namespace clustersim;

TEST_CASE("quantities parse into SI units", "[units]") {
  std::string err;
  CHECK(*parse_quantity("450GBps", Dimension::bandwidth, &err) == Approx(450e9));
  CHECK(*parse_quantity("400Gbps", Dimension::bandwidth, &err) == Approx(50e9));
  CHECK(*parse_quantity("2us", Dimension::time, &err) == Approx(2e-6));
  CHECK(*parse_quantity(" 1.5 ms ", Dimension::time, &err) == Approx(1.5e-3));
  CHECK(*parse_quantity("80GiB", Dimension::bytes, &err) == Approx(80.0 * (1ull << 30)));
  CHECK(*parse_quantity("80GB", Dimension::bytes, &err) == Approx(80e9));
  CHECK(*parse_quantity("312TFLOPs", Dimension::flop_rate, &err) == Approx(312e12));
}

TEST_CASE("a bare number or a wrong unit says which unit to use", "[units]") {
  std::string err;
  CHECK_FALSE(parse_quantity("450", Dimension::bandwidth, &err));
  CHECK_THAT(err, Catch::Contains("no unit") && Catch::Contains("GBps"));
  CHECK_FALSE(parse_quantity("2 parsecs", Dimension::time, &err));
  CHECK_THAT(err, Catch::Contains("unknown unit \"parsecs\"") && Catch::Contains("us"));
  CHECK_FALSE(parse_quantity("fast", Dimension::bandwidth, &err));
  CHECK_THAT(err, Catch::Contains("\"fast\""));
  CHECK_FALSE(parse_quantity("-3us", Dimension::time, &err));
  CHECK_FALSE(parse_quantity("10GBps", Dimension::time, &err));
}
