#include "scenarios/json_writer.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace clustersim {

void append_json_string(std::string& out, std::string_view s) {
  // Per byte: 0 copied as it is, 1 escaped, 2 not ASCII.
  static constexpr auto kind = [] {
    std::array<unsigned char, 256> k{};
    for (int c = 0; c < 0x20; ++c) k[c] = 1;
    k['"'] = k['\\'] = 1;
    for (int c = 0x80; c < 0x100; ++c) k[c] = 2;
    return k;
  }();
  const std::size_t start = out.size();
  out += '"';
  const char* run = s.data();  // start of the bytes copied as they are
  const char* const end = s.data() + s.size();
  for (const char* p = run; p != end; ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (kind[c] == 0) continue;
    if (kind[c] == 2) {
      out.resize(start);
      out += nlohmann::json(std::string(s)).dump();  // validates UTF-8 and throws as dump() does
      return;
    }
    out.append(run, p);
    run = p + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\f': out += "\\f"; break;
      case '\r': out += "\\r"; break;
      default: {
        static constexpr char hex[] = "0123456789abcdef";
        const char u[] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 0xf]};
        out.append(u, sizeof u);
      }
    }
  }
  out.append(run, end);
  out += '"';
}

void append_json_number(std::string& out, double x) {
  if (!std::isfinite(x)) {
    out += "null";
    return;
  }
  std::array<char, 64> buf;  // nlohmann's serializer uses the same formatter and buffer size
  out.append(buf.data(), nlohmann::detail::to_chars(buf.data(), buf.data() + buf.size(), x));
}

void append_json_number(std::string& out, std::int64_t x) {
  std::array<char, 24> buf;
  out.append(buf.data(), std::to_chars(buf.data(), buf.data() + buf.size(), x).ptr);
}

void append_json_number(std::string& out, std::uint64_t x) {
  std::array<char, 24> buf;
  out.append(buf.data(), std::to_chars(buf.data(), buf.data() + buf.size(), x).ptr);
}

void JsonWriter::before_value() {
  if (stack_.empty()) return;
  Frame& f = stack_.back();
  if (f.object) {
    if (!have_key_) throw std::logic_error("JsonWriter: a value in an object without a key");
    have_key_ = false;
    return;
  }
  if (!f.empty) out_ += ',';
  f.empty = false;
}

void JsonWriter::after_value() {
  if (!stack_.empty() && stack_.back().object) members_.back().end = out_.size();
}

void JsonWriter::key(std::string_view k) {
  if (stack_.empty() || !stack_.back().object || have_key_)
    throw std::logic_error("JsonWriter: key \"" + std::string(k) + "\" outside an object or after another key");
  for (const char c : k)
    if (static_cast<unsigned char>(c) < 0x20 || c == '"' || c == '\\' || static_cast<unsigned char>(c) >= 0x80)
      throw std::logic_error("JsonWriter: key \"" + std::string(k) + "\" needs escaping");
  Frame& f = stack_.back();
  if (!f.empty) out_ += ',';
  f.empty = false;
  out_ += '"';
  Span s;
  s.key_begin = out_.size();
  out_.append(k);
  s.key_end = out_.size();
  out_ += "\":";
  s.value_begin = s.end = out_.size();
  members_.push_back(s);
  have_key_ = true;
}

void JsonWriter::begin_object() {
  before_value();
  out_ += '{';
  stack_.push_back(Frame{true, out_.size(), members_.size(), true});
}

void JsonWriter::end_object(std::vector<Member>* members) {
  if (stack_.empty() || !stack_.back().object || have_key_)
    throw std::logic_error("JsonWriter: end_object without an open object, or after a key");
  const Frame f = stack_.back();
  stack_.pop_back();
  const auto first = members_.begin() + static_cast<std::ptrdiff_t>(f.members);
  const auto key_of = [this](const Span& s) {
    return std::string_view(out_.data() + s.key_begin, s.key_end - s.key_begin);
  };
  const auto less = [&](const Span& a, const Span& b) { return key_of(a) < key_of(b); };
  if (!std::is_sorted(first, members_.end(), less)) {
    // Rewrite the members in key order: same bytes, same length, so the enclosing
    // objects' spans stay valid.
    std::sort(first, members_.end(), less);
    scratch_.clear();
    for (auto it = first; it != members_.end(); ++it) {
      if (!scratch_.empty()) scratch_ += ',';
      const std::size_t moved = f.first + scratch_.size() + 1 - it->key_begin;  // new - old position
      scratch_.append(out_, it->key_begin - 1, it->end - it->key_begin + 1);
      it->key_begin += moved;
      it->key_end += moved;
      it->value_begin += moved;
      it->end += moved;
    }
    out_.replace(f.first, scratch_.size(), scratch_);
  }
  for (auto it = first; it != members_.end(); ++it)
    if (it + 1 != members_.end() && key_of(*it) == key_of(*(it + 1)))
      throw std::logic_error("JsonWriter: key \"" + std::string(key_of(*it)) + "\" written twice");
  out_ += '}';
  if (members) {
    members->clear();
    for (auto it = first; it != members_.end(); ++it) members->push_back({key_of(*it), it->value_begin, it->end});
  }
  members_.erase(first, members_.end());
  after_value();
}

void JsonWriter::begin_array() {
  before_value();
  out_ += '[';
  stack_.push_back(Frame{false, out_.size(), members_.size(), true});
}

void JsonWriter::end_array() {
  if (stack_.empty() || stack_.back().object) throw std::logic_error("JsonWriter: end_array without an open array");
  stack_.pop_back();
  out_ += ']';
  after_value();
}

void JsonWriter::null() {
  before_value();
  out_ += "null";
  after_value();
}

void JsonWriter::raw(std::string_view json) {
  before_value();
  out_.append(json);
  after_value();
}

void JsonWriter::value(bool b) {
  before_value();
  out_ += b ? "true" : "false";
  after_value();
}

void JsonWriter::value(std::string_view s) {
  before_value();
  append_json_string(out_, s);
  after_value();
}

}  // namespace clustersim
