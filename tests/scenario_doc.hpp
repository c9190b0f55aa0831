// Scenario documents in tests: the scenario a JSON document describes (the test fails,
// printing every problem, when it is not valid) and the problems it reports, one a line.
#pragma once
#include <catch2/catch.hpp>
#include <string>

#include "scenarios/json_reader.hpp"
#include "scenarios/scenario.hpp"

namespace clustersim::test {

inline Scenario scenario_from(const nlohmann::json& doc) {
  Diagnostics diag("<test>");
  Scenario s = parse_scenario(doc, diag);
  std::string problems;
  for (const auto& p : diag.problems()) problems += p.to_string() + "\n";
  INFO(problems);
  REQUIRE(diag.ok());
  return s;
}

inline std::string problems_of(const nlohmann::json& doc) {
  Diagnostics diag("x.json");
  parse_scenario(doc, diag);
  std::string out;
  for (const auto& p : diag.problems()) out += p.to_string() + "\n";
  return out;
}

}  // namespace clustersim::test
