// The sweep's serialisation shortcuts must write what nlohmann's dump() writes, byte for
// byte, or stored rows would change with the speed-up: results::dump on every shipped
// scenario file and on hand-made edge cases (escapes, non-ASCII, numbers at the limits),
// and scenario_text's text and hash against dump() and scenario_hash().
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <limits>

#include "results/json_text.hpp"
#include "results/store.hpp"

using namespace clustersim;
namespace fs = std::filesystem;

TEST_CASE("results::dump writes dump()'s bytes", "[results][json]") {
  const auto same = [](const nlohmann::json& j) { CHECK(results::dump(j) == j.dump()); };
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(CLUSTERSIM_SOURCE_DIR) / "data")) {
    if (e.path().extension() != ".json") continue;
    std::ifstream in(e.path());
    INFO(e.path().string());
    same(nlohmann::json::parse(in));
    ++files;
  }
  CHECK(files > 10);
  same(nlohmann::json::parse(R"({"": "", "a\"b": "q\"\\/\b\f\n\r\t\u0001\u001f\u007f", "é": "日本 \u00e9",
    "e": [], "o": {}, "n": null, "t": true, "f": false, "nested": [[{"x": [1, -2, 3.5]}]]})"));
  for (double x : {0.0, -0.0, 1.0, -1.5, 0.1, 1e-5, 1.5e-7, 123456789012345.0, 1e15, 1e16, 1e21, 1e-300, 5e-324,
                   std::numeric_limits<double>::max(), std::numeric_limits<double>::quiet_NaN(),
                   std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                   1.8224149524830808, 27999117312.0})
    same(nlohmann::json(x));
  for (std::int64_t i : {std::int64_t{0}, std::int64_t{-1}, std::numeric_limits<std::int64_t>::min(),
                         std::numeric_limits<std::int64_t>::max()})
    same(nlohmann::json(i));
  same(nlohmann::json(std::numeric_limits<std::uint64_t>::max()));
  // Invalid UTF-8 throws as dump() does.
  CHECK_THROWS_AS(results::dump(nlohmann::json(std::string("bad \xff byte"))), nlohmann::json::type_error);
}

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
