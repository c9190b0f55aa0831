// Sweep files: parsing with file + JSON path problems, and on-demand expansion of a
// point (mixed-radix index over the axes, the last axis fastest).
#include "scenarios/sweep.hpp"

#include <array>
#include <cmath>
#include <optional>
#include <filesystem>
#include <fmt/format.h>

#include "scenarios/json_reader.hpp"
#include "scenarios/scenario.hpp"

namespace clustersim {
namespace {

constexpr std::size_t max_points = 10'000'000;  // a typo in a range should not expand forever
constexpr std::size_t max_axis_values = 1'000'000;

bool is_scenario_section(const std::string& key) {
  for (const char* k : {"name", "description", "model", "training", "cluster", "plan", "simulation"})
    if (key == k) return true;
  return false;
}

std::string short_name(const std::string& pointer) { return pointer.substr(pointer.rfind('/') + 1); }

std::string value_text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// Values of one field: a "values" list or a "range".
std::vector<nlohmann::json> parse_values(ObjectReader& r) {
  std::vector<nlohmann::json> out;
  Diagnostics& diag = r.diagnostics();
  const bool has_values = r.has("values"), has_range = r.has("range");
  if (has_values == has_range) {
    diag.error(r.path(), "give exactly one of \"values\" (a list) or \"range\" ({from, to, step | factor})");
    return out;
  }
  if (has_values) {
    const auto* v = r.get("values");
    if (!v->is_array() || v->empty()) {
      diag.error(r.path("values"), "expected a non-empty list, got " + describe(*v));
      return out;
    }
    return std::vector<nlohmann::json>(v->begin(), v->end());
  }
  const auto* range = r.object("range");
  if (!range) return out;
  ObjectReader rr(*range, r.path("range"), diag, {"from", "to", "step", "factor"});
  const auto from = rr.number("from", -1e300, 1e300);
  const auto to = rr.number("to", -1e300, 1e300);
  const bool has_step = rr.has("step"), has_factor = rr.has("factor");
  if (has_step == has_factor) {
    diag.error(rr.path(), "give exactly one of \"step\" (arithmetic) or \"factor\" (geometric)");
    return out;
  }
  const auto step = has_step ? rr.number("step", 1e-300, 1e300) : std::nullopt;
  const auto factor = has_factor ? rr.number("factor", 1.0 + 1e-12, 1e300) : std::nullopt;
  if (!from || !to || (!step && !factor)) return out;
  const double st = step.value_or(0.0), fa = factor.value_or(1.0);
  if (*to < *from) {
    diag.error(rr.path("to"), fmt::format("expected a value >= from ({}), got {}", *from, *to));
    return out;
  }
  if (factor && *from <= 0) {
    diag.error(rr.path("from"), fmt::format("a geometric range needs from > 0, got {}", *from));
    return out;
  }
  // Integers stay integers (a micro-batch of 2, not 2.0) when every input is one.
  const auto integral = [](const nlohmann::json* j) { return j == nullptr || j->is_number_integer(); };
  const bool ints = integral(rr.get("from")) && integral(rr.get("to")) && integral(rr.get("step")) &&
                    std::floor(fa) == fa;
  const double tolerance = 1e-9 * std::max(1.0, std::abs(*to));
  for (std::size_t k = 0;; ++k) {
    const double x = has_step ? *from + static_cast<double>(k) * st : *from * std::pow(fa, static_cast<double>(k));
    if (x > *to + tolerance) break;
    if (out.size() == max_axis_values) {
      diag.error(rr.path(), fmt::format("more than {} values", max_axis_values));
      return {};
    }
    if (ints) out.emplace_back(static_cast<std::int64_t>(std::llround(x)));
    else out.emplace_back(x);
  }
  return out;
}

// One {"field": ..., "values" | "range": ...} entry.
void parse_field(const nlohmann::json& j, const std::string& path, Diagnostics& diag, SweepAxis& axis) {
  ObjectReader r(j, path, diag, {"field", "values", "range"});
  if (!r.valid()) return;
  const auto field = r.string("field");
  auto values = parse_values(r);
  if (!field) return;
  try {
    const nlohmann::json::json_pointer ptr(*field);
    if (ptr.empty()) throw std::invalid_argument("empty");
    const std::size_t end = field->find('/', 1);
    const std::string top(field->begin() + 1, end == std::string::npos ? field->end() : field->begin() + static_cast<std::ptrdiff_t>(end));
    if (!is_scenario_section(top)) {
      diag.error(r.path("field"), fmt::format("\"{}\" is not in a scenario section (model, training, cluster, "
                                              "plan, simulation, name, description)", *field));
      return;
    }
  } catch (const std::exception&) {
    diag.error(r.path("field"), fmt::format("expected a JSON pointer such as \"/plan/tp\", got \"{}\"", *field));
    return;
  }
  // "/cluster/intra_node/bandwidth": section "cluster", "/intra_node/bandwidth" inside it.
  // A "-" token appends to an array: setting it again at every point would not give the
  // same document, so such a field is set on the whole document (sweep_point).
  const std::size_t second = field->find('/', 1);
  const bool appends = field->find("/-/") != std::string::npos || field->ends_with("/-");
  int section = -1;
  if (second != std::string::npos && !appends)
    for (int k = 0; k < static_cast<int>(std::size(scenario_sections)); ++k)
      if (std::string_view(*field).substr(1, second - 1) == scenario_sections[k]) section = k;
  std::vector<std::string> labels;
  labels.reserve(values.size());
  for (const auto& v : values) labels.push_back(value_text(v));
  axis.fields.push_back(*field);
  axis.values.push_back(std::move(values));
  axis.pointers.emplace_back(*field);
  axis.in_section.emplace_back(section < 0 ? std::string() : field->substr(second));
  axis.labels.push_back(std::move(labels));
  axis.sections.push_back(section);
}

SweepAxis parse_axis(const nlohmann::json& j, const std::string& path, Diagnostics& diag) {
  SweepAxis axis;
  if (j.is_object() && j.contains("zip")) {
    ObjectReader r(j, path, diag, {"zip"});
    const auto& zip = j["zip"];
    if (!zip.is_array() || zip.size() < 2) {
      diag.error(r.path("zip"), "expected a list of at least two {field, values | range} entries, got " +
                                    describe(zip));
      return axis;
    }
    for (std::size_t i = 0; i < zip.size(); ++i) parse_field(zip[i], json_path(r.path("zip"), i), diag, axis);
    for (std::size_t i = 1; i < axis.values.size(); ++i)
      if (axis.values[i].size() != axis.values[0].size())
        diag.error(json_path(r.path("zip"), i),
                   fmt::format("zipped fields need lists of one length: \"{}\" has {} values, \"{}\" has {}",
                               axis.fields[i], axis.values[i].size(), axis.fields[0], axis.values[0].size()));
    return axis;
  }
  parse_field(j, path, diag, axis);
  return axis;
}

}  // namespace

std::size_t SweepSpec::point_count() const {
  std::size_t n = 1;
  for (const auto& a : axes) n *= a.size();
  return n;
}

SweepSpec parse_sweep(const nlohmann::json& doc, const std::string& file, Diagnostics& diag) {
  SweepSpec spec;
  spec.file = file;
  ObjectReader r(doc, "", diag, {"name", "description", "base", "axes", "skip_invalid", "method"});
  if (!r.valid()) return spec;
  spec.name = r.string("name", false).value_or(std::filesystem::path(file).stem().string());
  spec.description = r.string("description", false).value_or("");
  spec.skip_invalid = r.boolean("skip_invalid", false).value_or(false);
  spec.method = r.choice("method", {"analytical", "simulated"}, false).value_or("analytical");
  if (const auto* base = r.get("base")) {
    if (base->is_object()) {
      spec.base = *base;
      spec.base_file = file;
    } else if (base->is_string()) {
      const std::string b = base->get<std::string>();
      if (b == "default") {
        spec.base_file = "<built-in default>";
        spec.base = parse_json_text(default_scenario_text(), spec.base_file);
      } else {
        std::filesystem::path p(b);
        if (p.is_relative()) p = std::filesystem::path(file).parent_path() / p;
        spec.base_file = p.lexically_normal().string();
        try {
          spec.base = read_json_file(spec.base_file);
        } catch (const InputError& e) {
          diag.error(r.path("base"), fmt::format("cannot read base scenario \"{}\": {}", spec.base_file, e.what()));
        }
      }
    } else {
      diag.error(r.path("base"), "expected a scenario file path, \"default\" or a scenario object, got " +
                                     describe(*base));
    }
  } else {
    diag.error(r.path("base"), "missing: the scenario the axes vary (a file path, \"default\" or an object)");
  }
  const auto* axes = r.get("axes");
  if (!axes) {
    diag.error(r.path("axes"), "missing: a list of axes");
  } else if (!axes->is_array() || axes->empty()) {
    diag.error(r.path("axes"), "expected a non-empty list of axes, got " + describe(*axes));
  } else {
    for (std::size_t i = 0; i < axes->size(); ++i) {
      auto axis = parse_axis((*axes)[i], json_path(r.path("axes"), i), diag);
      if (!axis.fields.empty()) spec.axes.push_back(std::move(axis));
    }
  }
  if (!diag.ok()) return spec;
  double total = 1;
  for (const auto& a : spec.axes) total *= static_cast<double>(a.size());
  if (total > static_cast<double>(max_points)) {
    diag.error(r.path("axes"), fmt::format("{:.0f} points; at most {} per sweep", total, max_points));
    return spec;
  }
  // A misspelt field would make every point invalid (and, with skip_invalid, silently
  // skipped): try each field on the base and report unknown keys against the sweep file.
  for (std::size_t i = 0; i < spec.axes.size(); ++i) {
    for (std::size_t f = 0; f < spec.axes[i].fields.size(); ++f) {
      nlohmann::json probe = spec.base;
      const std::string& field = spec.axes[i].fields[f];
      try {
        probe[nlohmann::json::json_pointer(field)] = spec.axes[i].values[f].front();
      } catch (const std::exception& e) {
        diag.error(json_path(r.path("axes"), i), fmt::format("cannot set \"{}\" in the base scenario: {}", field, e.what()));
        continue;
      }
      Diagnostics probe_diag(spec.base_file);
      (void)parse_scenario(probe, probe_diag);
      for (const auto& p : probe_diag.problems())
        if (p.path == field && p.message.find("unknown key") != std::string::npos)
          diag.error(json_path(r.path("axes"), i), fmt::format("field \"{}\": {}", field, p.message));
    }
  }
  if (!diag.ok()) return spec;
  // Points are parsed section by section only from a base without problems: a problem
  // of an unedited section would otherwise be reported by parse_scenario and not here.
  bool in_sections = true;
  for (const auto& a : spec.axes)
    for (const int k : a.sections) in_sections = in_sections && k >= 0;
  if (in_sections) {
    Diagnostics base_diag(spec.base_file);
    auto base = std::make_shared<Scenario>(parse_scenario(spec.base, base_diag));
    if (base_diag.ok()) spec.base_scenario = std::move(base);
  }
  return spec;
}

SweepSpec load_sweep(const std::string& file) {
  const auto doc = read_json_file(file);
  Diagnostics diag(file);
  SweepSpec s = parse_sweep(doc, file, diag);
  diag.throw_if_errors();
  return s;
}

namespace {

// The value index of each axis at point `index` (mixed radix, the last axis fastest).
std::vector<std::size_t> digits(const SweepSpec& spec, std::size_t index) {
  std::vector<std::size_t> digit(spec.axes.size());
  for (std::size_t i = spec.axes.size(); i-- > 0;) {
    digit[i] = index % spec.axes[i].size();
    index /= spec.axes[i].size();
  }
  return digit;
}

// Calls f(axis, field, value) for every field the point sets, in the sweep file's order,
// and returns the point's name ("bench [tp=2 zero=1]").
template <class F>
std::string for_each_value(const SweepSpec& spec, std::size_t index, F&& f) {
  const std::vector<std::size_t> digit = digits(spec, index);
  std::string label;
  for (std::size_t i = 0; i < spec.axes.size(); ++i) {
    const auto& a = spec.axes[i];
    for (std::size_t k = 0; k < a.fields.size(); ++k) {
      f(a, k, a.values[k][digit[i]]);
      if (!label.empty()) label += ' ';
      label.append(short_name(a.fields[k])).append(1, '=').append(a.labels[k][digit[i]]);
    }
  }
  return spec.name + " [" + label + "]";
}

}  // namespace

SweepPoint sweep_point(const SweepSpec& spec, std::size_t index) {
  SweepPoint p;
  p.index = index;
  p.doc = spec.base;
  p.axes = nlohmann::json::object();
  const std::string name = for_each_value(spec, index, [&](const SweepAxis& a, std::size_t k, const nlohmann::json& v) {
    p.doc[a.pointers[k]] = v;
    p.axes[a.fields[k]] = v;
  });
  // Axes over name/description are allowed; otherwise the point is named by its values.
  if (!p.axes.contains("/name")) p.doc["name"] = name;
  return p;
}

Scenario sweep_scenario(const SweepSpec& spec, std::size_t index, nlohmann::json& axes, Diagnostics& diag) {
  return SweepPointParser(spec).parse(index, axes, diag);
}

Scenario SweepPointParser::parse(std::size_t index, nlohmann::json& axes, Diagnostics& diag) {
  const SweepSpec& spec = spec_;
  if (!spec.base_scenario) {
    SweepPoint p = sweep_point(spec, index);
    axes = std::move(p.axes);
    return parse_scenario(p.doc, diag);
  }
  axes = nlohmann::json::object();
  const std::string name = for_each_value(spec, index, [&](const SweepAxis& a, std::size_t k, const nlohmann::json& v) {
    const auto section = static_cast<std::size_t>(a.sections[k]);
    auto& doc = docs_[section];
    if (!doc) {
      const auto it = spec.base.find(scenario_sections[section]);
      doc = it == spec.base.end() ? nlohmann::json() : *it;
    }
    (*doc)[a.in_section[k]] = v;
    axes[a.fields[k]] = v;
  });
  const auto at = [&](std::size_t k) { return docs_[k] ? &*docs_[k] : nullptr; };
  Scenario s = reparse_sections(*spec.base_scenario, {at(0), at(1), at(2), at(3), at(4)}, diag);
  s.name = name;
  return s;
}

nlohmann::json identity(const SweepSpec& spec) {
  nlohmann::json axes = nlohmann::json::array();
  for (const auto& a : spec.axes) {
    nlohmann::json ax = nlohmann::json::object();
    for (std::size_t f = 0; f < a.fields.size(); ++f) ax[a.fields[f]] = a.values[f];
    axes.push_back(ax);
  }
  return {{"base", spec.base}, {"axes", axes}, {"method", spec.method}, {"skip_invalid", spec.skip_invalid}};
}

}  // namespace clustersim
