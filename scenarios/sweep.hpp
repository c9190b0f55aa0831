// Sweep files: a base scenario and axes over any of its fields (JSON pointers), expanded
// into one scenario document per point. Axes are lists, ranges (arithmetic or
// geometric) or zipped groups that advance together; several axes form a grid (the
// last axis varies fastest). The format is documented in results/README.md.
//
// Expansion works on the scenario JSON document, so any field can be swept, units
// included ("300GBps"); validation of a point is parse_scenario's, nothing else.
// sweep_scenario parses a point without building its whole document where it can: the
// base is parsed once and only the sections the axes edit are parsed again, by the
// same section parsers (reparse_sections).
#pragma once
#include <array>
#include <cstddef>
#include <iterator>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "scenarios/diagnostics.hpp"
#include "scenarios/scenario.hpp"

namespace clustersim {

struct SweepAxis {
  std::vector<std::string> fields;               // JSON pointers into the scenario; > 1 when zipped
  std::vector<std::vector<nlohmann::json>> values;  // values[i][k]: field i at step k
  // Derived by parse_sweep, once instead of at every point: each field's pointer, and
  // its values as a point's name shows them.
  std::vector<nlohmann::json::json_pointer> pointers;
  std::vector<std::vector<std::string>> labels;
  // The section a field lies in (an index into scenario_sections) and its pointer
  // inside that section; section < 0 for a field that is not below a section object
  // (/name, /description, /plan itself).
  std::vector<int> sections;
  std::vector<nlohmann::json::json_pointer> in_section;
  std::size_t size() const { return values.empty() ? 0 : values.front().size(); }
};

struct SweepSpec {
  std::string file;                 // the sweep file, "<inline>" when not from a file
  std::string name, description;
  std::string base_file;            // where the base came from ("<built-in default>" or a path)
  nlohmann::json base;              // the base scenario document
  std::vector<SweepAxis> axes;
  bool skip_invalid = false;        // invalid points are skipped (counted) instead of recorded as failures
  std::string method = "analytical";
  // The base parsed once, when it parses without a problem and every axis sets a field
  // below a section object: then sweep_scenario parses only the edited sections.
  std::shared_ptr<const Scenario> base_scenario;
  std::size_t point_count() const;
};

// The scenario sections a sweep point may edit in place, in parse_scenario's order.
inline constexpr const char* scenario_sections[] = {"model", "training", "cluster", "plan", "simulation"};

struct SweepPoint {
  std::size_t index = 0;
  nlohmann::json doc;               // the scenario document of this point
  nlohmann::json axes;              // {"/plan/tp": 2, ...}: this point's axis values
};

// Parses a sweep document; problems go to `diag`. `file` locates a relative base path.
SweepSpec parse_sweep(const nlohmann::json& doc, const std::string& file, Diagnostics& diag);
// Reads and parses a sweep file; throws InputError listing every problem.
SweepSpec load_sweep(const std::string& file);
// Point `index` (0 <= index < point_count()), built on demand so that large sweeps are
// never held in memory at once.
SweepPoint sweep_point(const SweepSpec& spec, std::size_t index);
// Point `index` parsed and validated: the scenario and the problems (into `diag`) of
// parse_scenario(sweep_point(spec, index).doc), and the point's axis values into
// `axes`, without building the whole document when spec.base_scenario is set.
Scenario sweep_scenario(const SweepSpec& spec, std::size_t index, nlohmann::json& axes, Diagnostics& diag);

// sweep_scenario for many points of one sweep (one parser per thread): the edited
// sections' documents are kept from point to point instead of copied from the base for
// each (the copies cost as much as parsing them). Every point sets every axis field in
// the same order, so the documents it leaves are the base's with its own values.
class SweepPointParser {
 public:
  explicit SweepPointParser(const SweepSpec& spec) : spec_(spec) {}
  Scenario parse(std::size_t index, nlohmann::json& axes, Diagnostics& diag);

 private:
  const SweepSpec& spec_;
  std::array<std::optional<nlohmann::json>, std::size(scenario_sections)> docs_;
};
// What identifies a sweep: its base document, axes, method and skip rule (not its
// name or file), so that rerunning the same file resumes the same sweep.
nlohmann::json identity(const SweepSpec& spec);

}  // namespace clustersim
