// Input rules a fuzzer broke (issue 14): a key given twice, numbers beyond a double,
// hexadecimal and other non-decimal numbers in unit strings, absurd magnitudes. Each is
// refused with the file, the JSON path and the bad value.
#include <catch2/catch.hpp>

#include "costmodel/graph.hpp"
#include "scenarios/json_reader.hpp"
#include "scenarios/scenario.hpp"
#include "scenarios/units.hpp"

using namespace clustersim;
using nlohmann::json;

namespace {

// The problems parse_json_text reports for `text` (none when it parses).
std::vector<Problem> parse_problems(const std::string& text) {
  try {
    parse_json_text(text, "f.json");
  } catch (const InputError& e) {
    return e.problems();
  }
  return {};
}

std::vector<Problem> scenario_problems(const json& doc) {
  Diagnostics diag("x.json");
  parse_scenario(doc, diag);
  return diag.problems();
}

std::string dump(const std::vector<Problem>& ps) {
  std::string s;
  for (const auto& p : ps) s += p.to_string() + "\n";
  return s;
}

}  // namespace

TEST_CASE("a key given twice in one object is an error naming both places", "[scenario][input]") {
  const auto ps = parse_problems("{\"model\": {\"hidden\": 64,\n  \"layers\": 2,\n  \"hidden\": 128}}");
  INFO(dump(ps));
  REQUIRE(ps.size() == 1);
  CHECK(ps[0].file == "f.json");
  CHECK(ps[0].path == "/model/hidden");
  CHECK_THAT(ps[0].message, Catch::Contains("duplicate key \"hidden\"") && Catch::Contains("line 1, column 12") &&
                                Catch::Contains("line 3, column 3"));
  // Every duplicate at once, inside arrays too, and a key spelt with an escape is the same key.
  const auto many = parse_problems(R"({"a": 1, "a": 2, "axes": [{"x": 1}, {"x": 1, "\u0078": 2}]})");
  INFO(dump(many));
  REQUIRE(many.size() == 2);
  CHECK(many[0].path == "/a");
  CHECK(many[1].path == "/axes/1/x");
  // The same key in different objects is fine.
  CHECK(parse_problems(R"({"a": {"k": 1}, "b": {"k": 1}, "c": [{"k": 1}, {"k": 2}], "d": {}, "e": []})").empty());
}

TEST_CASE("a number beyond a double's range is an input error with its JSON path", "[scenario][input]") {
  for (const std::string number : {"1e999999999", "-1e400"}) {
    const auto ps = parse_problems("{\"training\": {\"micro_batch\": 1,\n \"global_batch\": " + number + "}}");
    INFO(dump(ps));
    REQUIRE(ps.size() == 1);
    CHECK(ps[0].path == "/training/global_batch");
    CHECK_THAT(ps[0].message, Catch::Contains(number) && Catch::Contains("too large") && Catch::Contains("line 2"));
  }
  // Very deep nesting is not a stack overflow.
  CHECK(parse_problems(std::string(100000, '[') + std::string(100000, ']')).empty());
}

TEST_CASE("unit strings take decimal numbers only", "[units][input]") {
  std::string err;
  const std::pair<const char*, Dimension> bad[] = {
      {"0x10Gbps", Dimension::bandwidth}, {"0X1p3GBps", Dimension::bandwidth}, {"infGBps", Dimension::bandwidth},
      {"nanus", Dimension::time},         {"inf s", Dimension::time},          {"0x1.8p1s", Dimension::time}};
  for (const auto& [text, dim] : bad) {
    INFO(text);
    err.clear();
    CHECK_FALSE(parse_quantity(text, dim, &err));
    CHECK_THAT(err, Catch::Contains(text));
  }
  CHECK_THAT(err, Catch::Contains("decimal"));
  CHECK(*parse_quantity("1.5e3us", Dimension::time, &err) == Approx(1.5e-3));
  CHECK(*parse_quantity("-0.0s", Dimension::time, &err) == 0.0);
  CHECK(*parse_quantity(".5GBps", Dimension::bandwidth, &err) == Approx(5e8));
  CHECK(*parse_quantity("2E1 GB", Dimension::bytes, &err) == Approx(2e10));
}

TEST_CASE("absurd magnitudes are refused per field, with the bad value", "[scenario][input]") {
  const json base = parse_json_text(default_scenario_text(), "<test>");
  struct Case {
    const char* pointer;
    const char* value;
  };
  for (const Case c : {Case{"/cluster/inter_node/latency", "1e300s"}, Case{"/cluster/inter_node/nic_bandwidth", "1e-300Gbps"},
                       Case{"/cluster/inter_node/nic_bandwidth", "1e300Gbps"}, Case{"/cluster/intra_node/latency", "2s"},
                       Case{"/cluster/intra_node/bandwidth", "0GBps"}, Case{"/cluster/intra_node/bandwidth", "1e30TBps"}}) {
    json doc = base;
    doc[json::json_pointer(c.pointer)] = c.value;
    const auto ps = scenario_problems(doc);
    INFO(c.pointer << " = " << c.value << "\n" << dump(ps));
    REQUIRE(ps.size() == 1);
    CHECK(ps[0].path == c.pointer);
    CHECK_THAT(ps[0].message, Catch::Contains(std::string("\"") + c.value + "\"") && Catch::Contains(" from ") &&
                                  Catch::Contains(" to "));
  }
  // The real range is open: 5us, 400Gbps, 900GBps and a zero latency are fine.
  json doc = base;
  doc["/cluster/inter_node/latency"_json_pointer] = "0us";
  doc["/cluster/intra_node/bandwidth"_json_pointer] = "900GBps";
  CHECK(scenario_problems(doc).empty());
}

TEST_CASE("the scenario rules split the same blocks over pipeline stages as the model graphs", "[scenario][input]") {
  // check_consistency counts pipeline_blocks; the estimator and the simulator split
  // the graph's layers. If the two ever differ, validate and simulate disagree again.
  for (const int depth : {26, 50, 101, 152}) {
    ModelSpec m;
    m.family = ModelFamily::wresnet;
    m.depth = depth;
    m.channels = 64;
    m.width = 2;
    m.image_size = 224;
    m.classes = 1000;
    INFO("depth " << depth);
    CHECK(static_cast<std::int64_t>(build_model_graph(m, 1, 2.0).layers.size()) == pipeline_blocks(m));
  }
  const Scenario s = default_scenario();
  CHECK(static_cast<std::int64_t>(build_model_graph(s.model, 1, 2.0).layers.size()) == pipeline_blocks(s.model));
}
