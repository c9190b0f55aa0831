// ObjectReader: typed, range-checked access that records problems instead of throwing.
#include "scenarios/json_reader.hpp"

#include <fmt/format.h>
#include <fstream>
#include <sstream>

namespace clustersim {

std::string describe(const nlohmann::json& value) {
  if (value.is_object()) return "an object";
  if (value.is_array()) return fmt::format("an array of {}", value.size());
  if (value.is_null()) return "null";
  std::string s = value.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

ObjectReader::ObjectReader(const nlohmann::json& value, std::string path, Diagnostics& diag,
                           std::initializer_list<std::string_view> known_keys)
    : path_(std::move(path)), diag_(diag) {
  if (!value.is_object()) {
    diag_.error(path_, fmt::format("expected an object, got {}", describe(value)));
    return;
  }
  object_ = &value;
  const std::vector<std::string_view> keys(known_keys);
  for (const auto& [key, _] : value.items()) {
    bool known = false;
    for (auto k : keys) known = known || (k == key);
    if (known) continue;
    const std::string suggestion = nearest(key, keys);
    if (!suggestion.empty())
      diag_.error(json_path(path_, key), fmt::format("unknown key \"{}\"; did you mean \"{}\"?", key, suggestion));
    else {
      std::string list;
      for (auto k : keys) list += (list.empty() ? "" : ", ") + std::string(k);
      diag_.error(json_path(path_, key), fmt::format("unknown key \"{}\"; valid keys here: {}", key, list));
    }
  }
}

bool ObjectReader::has(std::string_view key) const {
  return object_ && object_->contains(std::string(key));
}

const nlohmann::json* ObjectReader::get(std::string_view key) const {
  if (!has(key)) return nullptr;
  return &object_->at(std::string(key));
}

const nlohmann::json* ObjectReader::lookup(std::string_view key, bool required) {
  if (!object_) return nullptr;
  const auto* v = get(key);
  if (!v && required) diag_.error(path(key), "required key is missing");
  return v;
}

std::optional<std::int64_t> ObjectReader::integer(std::string_view key, std::int64_t min, std::int64_t max,
                                                  bool required) {
  const auto* v = lookup(key, required);
  if (!v) return std::nullopt;
  const auto range = [&] {
    if (max == INT64_MAX) return fmt::format(">= {}", min);
    return fmt::format("in [{}, {}]", min, max);
  };
  if (!v->is_number_integer()) {
    diag_.error(path(key), fmt::format("expected an integer {}, got {}", range(), describe(*v)));
    return std::nullopt;
  }
  if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
    diag_.error(path(key), fmt::format("expected an integer {}, got {}", range(), describe(*v)));
    return std::nullopt;
  }
  const auto x = v->get<std::int64_t>();
  if (x < min || x > max) {
    diag_.error(path(key), fmt::format("expected an integer {}, got {}", range(), x));
    return std::nullopt;
  }
  return x;
}

std::optional<double> ObjectReader::number(std::string_view key, double min, double max, bool required) {
  const auto* v = lookup(key, required);
  if (!v) return std::nullopt;
  if (!v->is_number()) {
    diag_.error(path(key), fmt::format("expected a number in [{}, {}], got {}", min, max, describe(*v)));
    return std::nullopt;
  }
  const double x = v->get<double>();
  if (!(x >= min && x <= max)) {
    diag_.error(path(key), fmt::format("expected a number in [{}, {}], got {}", min, max, describe(*v)));
    return std::nullopt;
  }
  return x;
}

std::optional<bool> ObjectReader::boolean(std::string_view key, bool required) {
  const auto* v = lookup(key, required);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) {
    diag_.error(path(key), fmt::format("expected true or false, got {}", describe(*v)));
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<std::string> ObjectReader::string(std::string_view key, bool required) {
  const auto* v = lookup(key, required);
  if (!v) return std::nullopt;
  if (!v->is_string()) {
    diag_.error(path(key), fmt::format("expected a string, got {}", describe(*v)));
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::optional<std::string> ObjectReader::choice(std::string_view key, std::initializer_list<std::string_view> allowed,
                                                bool required) {
  auto s = string(key, required);
  if (!s) return std::nullopt;
  for (auto a : allowed)
    if (a == *s) return s;
  std::string list;
  for (auto a : allowed) list += (list.empty() ? "" : " | ") + std::string(a);
  const std::vector<std::string_view> options(allowed);
  const std::string suggestion = nearest(*s, options);
  diag_.error(path(key), fmt::format("expected one of {}, got \"{}\"{}", list, *s,
                                     suggestion.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", suggestion)));
  return std::nullopt;
}

std::optional<double> ObjectReader::quantity(std::string_view key, Dimension dim, bool required) {
  const auto* v = lookup(key, required);
  if (!v) return std::nullopt;
  if (v->is_number()) {
    diag_.error(path(key), fmt::format("{} has no unit; write it as a string with one of {}", describe(*v),
                                       unit_examples(dim)));
    return std::nullopt;
  }
  if (!v->is_string()) {
    diag_.error(path(key), fmt::format("expected {} as a string with a unit ({}), got {}", dimension_name(dim),
                                       unit_examples(dim), describe(*v)));
    return std::nullopt;
  }
  std::string err;
  auto q = parse_quantity(v->get<std::string>(), dim, &err);
  if (!q) diag_.error(path(key), err);
  return q;
}

const nlohmann::json* ObjectReader::object(std::string_view key, bool required) {
  const auto* v = lookup(key, required);
  if (!v) return nullptr;
  if (!v->is_object()) {
    diag_.error(path(key), fmt::format("expected an object, got {}", describe(*v)));
    return nullptr;
  }
  return v;
}

nlohmann::json parse_json_text(std::string_view text, const std::string& file) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // Turn the byte offset into line:column for the message.
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i < text.size() && i + 1 < e.byte; ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string what = e.what();
    const auto pos = what.find("syntax error");
    if (pos != std::string::npos) what = what.substr(pos);
    throw InputError(file, "", fmt::format("invalid JSON at line {}, column {}: {}", line, col, what));
  }
}

nlohmann::json read_json_file(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(file, "", "cannot open the file (does it exist and is it readable?)");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_json_text(ss.str(), file);
}

}  // namespace clustersim
