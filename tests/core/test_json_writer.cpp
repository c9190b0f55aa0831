// The one serialiser of the canonical scenario and of the prediction (JsonWriter): its
// text must be what nlohmann's dump() writes for the same document, byte for byte
// (stored rows, scenario hashes and the resume keys of earlier sweeps rest on it). The
// trees are parsed from the text, so the checks here are that the text is already
// canonical (parse + dump gives it back: keys sorted, nlohmann's number forms, integers
// written as integers and doubles as doubles) and that it reads back to the same object.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fmt/format.h>
#include <limits>

#include "scenarios/json_reader.hpp"
#include "scenarios/json_writer.hpp"
#include "strategies/estimator.hpp"
#include "strategies/resolved_plan.hpp"

using namespace clustersim;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
// dump() of the parsed text: the text nlohmann would write for this document.
void check_canonical(const std::string& text) {
  INFO(text.substr(0, 200));
  CHECK(json::parse(text).dump() == text);
}

std::vector<fs::path> training_scenarios() {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(CLUSTERSIM_SOURCE_DIR) / "data" / "scenarios"))
    if (e.path().extension() == ".json" && !read_json_file(e.path().string()).contains("serving"))
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}
}  // namespace

TEST_CASE("JsonWriter sorts each object's members and writes what dump() writes", "[json]") {
  std::string out;
  JsonWriter w(out);
  std::vector<JsonWriter::Member> top;
  w.begin_object();
  w.member("zeta", std::int64_t{3});
  w.member("alpha", 2.0);
  w.key("mid");
  w.begin_object();
  w.member("y", std::vector<std::int64_t>{1, 2});
  w.member("b", true);
  w.key("n");
  w.null();
  w.member("a", "q\"\\\n\x01 \xc3\xa9");
  w.end_object();
  w.member("Upper", 0.1);
  w.member("alpha2", std::numeric_limits<double>::quiet_NaN());
  w.member("big", std::numeric_limits<std::uint64_t>::max());
  w.member("neg", -0.0);
  w.key("raw");
  w.raw(R"({"k":[1,2.5]})");
  w.key("empty");
  w.begin_object();
  w.end_object();
  w.key("arr");
  w.begin_array();
  w.end_array();
  w.member("i", 7);
  w.end_object(&top);
  const std::string expected =
      R"({"Upper":0.1,"alpha":2.0,"alpha2":null,"arr":[],"big":18446744073709551615,"empty":{},"i":7,)"
      R"("mid":{"a":"q\"\\\n\u0001 é","b":true,"n":null,"y":[1,2]},"neg":-0.0,"raw":{"k":[1,2.5]},"zeta":3})";
  std::printf("expected %s\nwritten  %s\n", expected.c_str(), out.c_str());
  CHECK(out == expected);
  check_canonical(out);
  // The members' spans, in key order, point at their values in the final text.
  REQUIRE(top.size() == 11);
  CHECK(top[0].key == "Upper");
  CHECK(out.substr(top[0].begin, top[0].end - top[0].begin) == "0.1");
  CHECK(top[7].key == "mid");
  CHECK(out.substr(top[7].begin, top[7].end - top[7].begin) == json::parse(out)["mid"].dump());
  CHECK(top[10].key == "zeta");
  CHECK(out.substr(top[10].begin, top[10].end - top[10].begin) == "3");
}

TEST_CASE("JsonWriter refuses what would not be one canonical object", "[json]") {
  std::string out;
  JsonWriter w(out);
  w.begin_object();
  w.member("a", 1);
  w.member("a", 2);
  CHECK_THROWS_AS(w.end_object(), std::logic_error);  // a key twice
  std::string out2;
  JsonWriter v(out2);
  v.begin_object();
  CHECK_THROWS_AS(v.key("needs \"escape\""), std::logic_error);
  CHECK_THROWS_AS(v.value(1), std::logic_error);  // a member without a key
  CHECK_THROWS_AS(v.end_array(), std::logic_error);
  // Invalid UTF-8 throws as dump() does.
  std::string out3;
  JsonWriter u(out3);
  CHECK_THROWS_AS(u.value(std::string("bad \xff byte")), json::type_error);
}

TEST_CASE("every shipped scenario's canonical text is dump()'s and reads back to itself", "[json][scenarios]") {
  const auto files = training_scenarios();
  REQUIRE(files.size() >= 11);
  for (const auto& f : files) {
    INFO(f.string());
    const Scenario s = load_scenario(f.string());
    const std::string text = to_json_text(s);
    check_canonical(text);
    CHECK(to_json(s).dump() == text);
    // Canonical means a fixed point: parsing it gives a scenario that writes the same text.
    Diagnostics diag(f.string());
    const Scenario again = parse_scenario(json::parse(text), diag);
    REQUIRE(diag.ok());
    CHECK(to_json_text(again) == text);
  }
}

TEST_CASE("predictions of shipped scenarios and plans write dump()'s text and read back", "[json][strategies]") {
  std::vector<Scenario> scenarios;
  for (const auto& f : training_scenarios()) scenarios.push_back(load_scenario(f.string()));
  // The default scenario under several plans: pipeline stages, ZeRO, recompute.
  const json base = parse_json_text(default_scenario_text(), "<default>");
  for (const char* patch : {R"({"plan": {"dp": 2, "tp": 2, "pp": 4, "zero": 1}})",
                            R"({"plan": {"dp": 16, "tp": 1, "pp": 1, "zero": 3}})",
                            R"({"training": {"recompute": "full"}, "plan": {"dp": 1, "tp": 4, "pp": 4}})"}) {
    json doc = base;
    doc.merge_patch(json::parse(patch));
    Diagnostics diag("<test>");
    Scenario s = parse_scenario(doc, diag);
    INFO(patch);
    REQUIRE(diag.ok());
    scenarios.push_back(std::move(s));
  }
  int n = 0;
  for (const auto& s : scenarios) {
    INFO(s.name);
    const Prediction p = s.plan.searched() || !s.plan.file.empty() ? predict_scenario(s) : make_estimator(s).estimate(s.plan);
    const std::string text = to_json_text(p);
    check_canonical(text);
    CHECK(to_json(p).dump() == text);
    CHECK(to_json_text(prediction_from_json(json::parse(text))) == text);
    n += p.stages.size() > 1;
  }
  CHECK(n > 0);  // some prediction had several stages
}

TEST_CASE("the canonical scenario's quantities are printf's %.17g with their unit", "[json][scenarios]") {
  // They are written with std::to_chars; fmt's "{:.17g}" wrote them before, and every
  // stored scenario hash rests on those bytes. Awkward values: non-terminating binary
  // fractions, 17 significant digits, exponents both ways.
  for (const double bw : {300e9, 123.456789e9, 1.0 / 3.0 * 1e12, 12.5e9, 1e14, 1.25e5, 299792458.123456789}) {
    for (const double lat : {3e-6, 0.3e-6, 1.0 / 7.0 * 1e-3, 0.0, 1.0, 2.5e-9}) {
      Scenario s = default_scenario();
      s.cluster.intra_node.bandwidth = bw;
      s.cluster.intra_node.latency = lat;
      const json intra = json::parse(to_json_text(s))["cluster"]["intra_node"];
      INFO("bandwidth " << fmt::format("{:.17g}", bw) << ", latency " << fmt::format("{:.17g}", lat));
      CHECK(intra["bandwidth"] == fmt::format("{:.17g}Bps", bw));
      CHECK(intra["latency"] == fmt::format("{:.17g}s", lat));
    }
  }
}
