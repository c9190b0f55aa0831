// scenario_text serialises a canonical scenario once for a sweep's point: its text must
// be dump()'s and its hash scenario_hash()'s, byte for byte, or stored scenarios would
// change with the speed-up.
#include <catch2/catch.hpp>

#include "results/store.hpp"

using namespace clustersim;

TEST_CASE("scenario_text gives dump() and scenario_hash() from one serialisation", "[results][store]") {
  const auto check = [](const nlohmann::json& c) {
    const results::ScenarioText t = results::scenario_text(c);
    CHECK(t.json == c.dump());
    CHECK(t.hash == results::scenario_hash(c));
    if (c.is_object())
      for (auto it = c.begin(); it != c.end(); ++it) CHECK(t.section(it.key()) == it.value().dump());
  };
  check(nlohmann::json::parse(R"({"cluster": {"gpu": "h100", "nodes": 2}, "description": "d \"q\" \u00e9",
    "model": {"family": "gpt", "layers": 24}, "name": "n [tp=2]", "plan": {"tp": 2, "zero": 1.5e-7},
    "training": {"global_batch": 512}})"));
  check(nlohmann::json::parse(R"({"a": 1, "name": "only"})"));
  check(nlohmann::json::parse(R"({"name": "first", "z": [1, 2, {"b": null}]})"));
  check(nlohmann::json::object());
  check(nlohmann::json::array({1, 2}));
  CHECK(results::scenario_text(nlohmann::json::parse(R"({"a": 1})")).section("b").empty());
}
