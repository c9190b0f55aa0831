// ObjectReader: typed, range-checked access that records problems instead of throwing.
#include "scenarios/json_reader.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
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

std::optional<double> ObjectReader::quantity(std::string_view key, Dimension dim, bool required,
                                             std::optional<QuantityRange> range) {
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
  if (!q) {
    diag_.error(path(key), err);
    return q;
  }
  if (range && (*q < range->min || *q > range->max)) {
    const QuantityRange& r = *range;
    diag_.error(path(key), fmt::format("expected {} from {} to {}, got \"{}\"", dimension_name(dim),
                                       format_quantity(r.min, dim), format_quantity(r.max, dim),
                                       v->get<std::string>()));
    return std::nullopt;
  }
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

namespace {

struct TextPosition {
  std::size_t line = 1, column = 1;
};

TextPosition position_of(std::string_view text, std::size_t offset) {
  TextPosition p;
  for (std::size_t i = 0; i < text.size() && i < offset; ++i) {
    if (text[i] == '\n') {
      ++p.line;
      p.column = 1;
    } else {
      ++p.column;
    }
  }
  return p;
}

// A second walk over the text that nlohmann's DOM cannot do: it keeps where each key
// was written, so a key given twice in one object (nlohmann silently keeps the last) is
// reported with both places, and a number too large for a double is reported with its
// JSON path instead of nlohmann's bare "number overflow". The walk is iterative (a
// fuzzed "[[[[..." must not overflow the stack) and stops quietly at anything it does
// not understand: nlohmann has already rejected malformed text.
class TextScanner {
 public:
  TextScanner(std::string_view text, const std::string& file) : text_(text), diag_(file) {}

  void run() {
    struct Frame {
      bool object = false;
      std::string path;
      std::size_t index = 0;
      std::map<std::string, std::size_t> keys;  // key -> offset of its first occurrence
      std::string pending_key;
    };
    std::vector<Frame> stack;
    std::string root;
    // Path of the value that starts next.
    const auto value_path = [&]() -> std::string {
      if (stack.empty()) return root;
      Frame& f = stack.back();
      return f.object ? json_path(f.path, f.pending_key) : json_path(f.path, f.index);
    };
    bool expect_value = true;
    while (true) {
      skip_space();
      if (pos_ >= text_.size()) return;
      const char c = text_[pos_];
      if (expect_value) {
        if (c == '{' || c == '[') {
          Frame frame;
          frame.object = c == '{';
          frame.path = value_path();
          stack.push_back(std::move(frame));
          ++pos_;
          skip_space();
          if (pos_ < text_.size() && (text_[pos_] == '}' || text_[pos_] == ']')) {
            ++pos_;
            stack.pop_back();
            expect_value = false;
            continue;
          }
          if (stack.back().object) {
            if (!read_key(stack.back())) return;
          }
          continue;
        }
        if (c == '"') {
          if (!skip_string()) return;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
          const std::size_t start = pos_;
          while (pos_ < text_.size() && std::strchr("+-.eE0123456789", text_[pos_]) != nullptr) ++pos_;
          const std::string token(text_.substr(start, pos_ - start));
          const double x = std::strtod(token.c_str(), nullptr);
          if (!std::isfinite(x)) {
            const TextPosition at = position_of(text_, start);
            diag_.error(value_path(), fmt::format("the number {} (line {}, column {}) is too large for a double "
                                                  "(at most about 1.8e308)",
                                                  token.size() > 40 ? token.substr(0, 37) + "..." : token, at.line,
                                                  at.column));
            return;  // nlohmann stopped here too: what follows is unread
          }
        } else if (text_.compare(pos_, 4, "true") == 0 || text_.compare(pos_, 4, "null") == 0) {
          pos_ += 4;
        } else if (text_.compare(pos_, 5, "false") == 0) {
          pos_ += 5;
        } else {
          return;
        }
        expect_value = false;
        continue;
      }
      // After a value: a separator or the end of a container.
      if (stack.empty()) return;
      Frame& f = stack.back();
      if (c == ',') {
        ++pos_;
        if (f.object) {
          skip_space();
          if (!read_key(f)) return;
        } else {
          ++f.index;
        }
        expect_value = true;
      } else if (c == '}' || c == ']') {
        ++pos_;
        stack.pop_back();
      } else {
        return;
      }
    }
  }

  const Diagnostics& diagnostics() const { return diag_; }

 private:
  // Reads `"key" :` at pos_, records it in `f` and checks it against the keys before.
  template <class Frame>
  bool read_key(Frame& f) {
    skip_space();
    const std::size_t start = pos_;
    if (!skip_string()) return false;
    std::string key(text_.substr(start + 1, pos_ - start - 2));
    if (key.find('\\') != std::string::npos) {
      try {
        key = nlohmann::json::parse(text_.substr(start, pos_ - start)).get<std::string>();
      } catch (const nlohmann::json::exception&) {
        return false;
      }
    }
    const auto [it, inserted] = f.keys.emplace(key, start);
    if (!inserted) {
      const TextPosition first = position_of(text_, it->second), again = position_of(text_, start);
      diag_.error(json_path(f.path, key),
                  fmt::format("duplicate key \"{}\": given at line {}, column {} and again at line {}, column {}; "
                              "keep one (a JSON reader would silently take the last)",
                              key, first.line, first.column, again.line, again.column));
    }
    f.pending_key = std::move(key);
    skip_space();
    if (pos_ >= text_.size() || text_[pos_] != ':') return false;
    ++pos_;
    return true;
  }

  bool skip_string() {
    if (pos_ >= text_.size() || text_[pos_] != '"') return false;
    for (++pos_; pos_ < text_.size(); ++pos_) {
      if (text_[pos_] == '\\') {
        ++pos_;
      } else if (text_[pos_] == '"') {
        ++pos_;
        return true;
      }
    }
    return false;
  }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  Diagnostics diag_;
};

}  // namespace

nlohmann::json parse_json_text(std::string_view text, const std::string& file) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    const TextPosition at = position_of(text, e.byte == 0 ? 0 : e.byte - 1);
    std::string what = e.what();
    const auto pos = what.find("syntax error");
    if (pos != std::string::npos) what = what.substr(pos);
    throw InputError(file, "", fmt::format("invalid JSON at line {}, column {}: {}", at.line, at.column, what));
  } catch (const nlohmann::json::exception& e) {
    // A number beyond a double's range (out_of_range.406): the scan below names it.
    TextScanner scan(text, file);
    scan.run();
    scan.diagnostics().throw_if_errors();
    throw InputError(file, "", fmt::format("invalid JSON: {}", e.what()));
  }
  TextScanner scan(text, file);
  scan.run();
  scan.diagnostics().throw_if_errors();
  return doc;
}

nlohmann::json read_json_file(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(file, "", "cannot open the file (does it exist and is it readable?)");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_json_text(ss.str(), file);
}

}  // namespace clustersim
