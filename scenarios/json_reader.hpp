// Strict reading of one JSON object: unknown keys are errors (with the nearest valid
// key suggested), every typed getter checks type and range and records a Problem
// instead of throwing, so one pass reports everything wrong with a file.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "scenarios/diagnostics.hpp"
#include "scenarios/units.hpp"

namespace clustersim {

class ObjectReader {
 public:
  // Reports a non-object value and unknown keys right away. `valid` is null when the
  // value is not an object; every getter then returns nullopt.
  ObjectReader(const nlohmann::json& value, std::string path, Diagnostics& diag,
               std::initializer_list<std::string_view> known_keys);

  bool valid() const { return object_ != nullptr; }
  bool has(std::string_view key) const;
  const nlohmann::json* get(std::string_view key) const;
  std::string path(std::string_view key) const { return json_path(path_, key); }
  const std::string& path() const { return path_; }
  Diagnostics& diagnostics() { return diag_; }

  std::optional<std::int64_t> integer(std::string_view key, std::int64_t min, std::int64_t max,
                                      bool required = true);
  std::optional<double> number(std::string_view key, double min, double max, bool required = true);
  std::optional<bool> boolean(std::string_view key, bool required = true);
  std::optional<std::string> string(std::string_view key, bool required = true);
  std::optional<std::string> choice(std::string_view key, std::initializer_list<std::string_view> allowed,
                                    bool required = true);
  // A string with a unit, in SI, finite and >= 0, and within `range` when given.
  std::optional<double> quantity(std::string_view key, Dimension dim, bool required = true,
                                 std::optional<QuantityRange> range = std::nullopt);
  // Child object (nullptr when absent or not an object; the latter is reported).
  const nlohmann::json* object(std::string_view key, bool required = true);

 private:
  const nlohmann::json* lookup(std::string_view key, bool required);
  const nlohmann::json* object_ = nullptr;
  std::string path_;
  Diagnostics& diag_;
};

// A short rendering of a JSON value for messages ("-2", "\"fat tree\"", "an object").
std::string describe(const nlohmann::json& value);

// The enum value a name stands for, in a table of {value, name} pairs (a std::array or a
// std::vector of them).
template <typename Table>
using EnumOf = std::decay_t<decltype(std::begin(std::declval<const Table&>())->first)>;

// The name of `e` in `table` ("?" when absent).
template <typename Table>
std::string_view enum_name(const Table& table, EnumOf<Table> e) {
  for (const auto& [value, name] : table)
    if (value == e) return name;
  return "?";
}

// Reads `key` as one of the table's names: a missing required key, a value that is not a
// string, or an unknown name is reported with the names allowed and the nearest one.
template <typename Table>
std::optional<EnumOf<Table>> read_enum(ObjectReader& r, std::string_view key, const Table& table, bool required) {
  const auto* v = r.get(key);
  if (!v && !required) return std::nullopt;
  if (!v) {
    r.diagnostics().error(r.path(key), "required key is missing");
    return std::nullopt;
  }
  if (!v->is_string()) {
    r.diagnostics().error(r.path(key), "expected a string, got " + describe(*v));
    return std::nullopt;
  }
  const std::string s = v->get<std::string>();
  std::vector<std::string_view> names;
  for (const auto& [value, name] : table) {
    if (name == s) return value;
    names.push_back(name);
  }
  std::string list;
  for (auto n : names) list += (list.empty() ? "" : " | ") + std::string(n);
  const std::string guess = nearest(s, names);
  r.diagnostics().error(r.path(key), "expected one of " + list + ", got \"" + s + "\"" +
                                         (guess.empty() ? "" : " (did you mean \"" + guess + "\"?)"));
  return std::nullopt;
}

// Parses `text` as JSON; a syntax error becomes a Problem with line and column.
nlohmann::json parse_json_text(std::string_view text, const std::string& file);
// Reads and parses a file; a missing file is an InputError naming it.
nlohmann::json read_json_file(const std::string& file);

}  // namespace clustersim
