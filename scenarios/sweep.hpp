// Sweep files: a base scenario and axes over any of its fields (JSON pointers), expanded
// into one scenario document per point. Axes are lists, ranges (arithmetic or
// geometric) or zipped groups that advance together; several axes form a grid (the
// last axis varies fastest). The format is documented in results/README.md.
//
// Expansion works on the scenario JSON document, so any field can be swept, units
// included ("300GBps"); validation of a point is parse_scenario's, nothing else.
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "scenarios/diagnostics.hpp"

namespace clustersim {

struct SweepAxis {
  std::vector<std::string> fields;               // JSON pointers into the scenario; > 1 when zipped
  std::vector<std::vector<nlohmann::json>> values;  // values[i][k]: field i at step k
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
  std::size_t point_count() const;
};

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
// What identifies a sweep: its base document, axes, method and skip rule (not its
// name or file), so that rerunning the same file resumes the same sweep.
nlohmann::json identity(const SweepSpec& spec);

}  // namespace clustersim
