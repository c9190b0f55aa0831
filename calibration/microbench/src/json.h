// Tiny streaming JSON writer (no external dependencies).
// Containers nested up to `pretty_depth` levels put each element on its own line;
// deeper containers are written inline, so that one record is one line.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace mb {

class Json {
 public:
  explicit Json(int pretty_depth = 3) : pretty_depth_(pretty_depth) {}

  Json& begin_obj() { open('{'); return *this; }
  Json& end_obj() { close('}'); return *this; }
  Json& begin_arr() { open('['); return *this; }
  Json& end_arr() { close(']'); return *this; }

  Json& key(const std::string& k) {
    sep();
    s_ += '"';
    escape_into(k);
    s_ += "\":";
    after_key_ = true;
    return *this;
  }
  Json& str(const std::string& v) {
    sep();
    s_ += '"';
    escape_into(v);
    s_ += '"';
    return *this;
  }
  Json& num(double v) {
    sep();
    if (!std::isfinite(v)) {
      s_ += "null";
    } else {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.9g", v);
      s_ += buf;
    }
    return *this;
  }
  Json& integer(long long v) {
    sep();
    s_ += std::to_string(v);
    return *this;
  }
  Json& boolean(bool v) {
    sep();
    s_ += v ? "true" : "false";
    return *this;
  }
  Json& null() {
    sep();
    s_ += "null";
    return *this;
  }
  // Insert an already-serialised JSON value.
  Json& raw(const std::string& json_text) {
    sep();
    s_ += json_text;
    return *this;
  }

  Json& kv_str(const std::string& k, const std::string& v) { return key(k).str(v); }
  Json& kv_num(const std::string& k, double v) { return key(k).num(v); }
  Json& kv_int(const std::string& k, long long v) { return key(k).integer(v); }
  Json& kv_bool(const std::string& k, bool v) { return key(k).boolean(v); }
  Json& kv_raw(const std::string& k, const std::string& v) { return key(k).raw(v); }

  const std::string& text() const { return s_; }

 private:
  void open(char c) {
    sep();
    s_ += c;
    first_.push_back(true);
  }
  void close(char c) {
    bool empty = first_.empty() ? true : first_.back();
    int depth = static_cast<int>(first_.size());
    if (!first_.empty()) first_.pop_back();
    if (!empty && depth <= pretty_depth_) newline(depth - 1);
    s_ += c;
  }
  void newline(int indent) {
    s_ += '\n';
    for (int i = 0; i < indent; ++i) s_ += ' ';
  }
  void sep() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (first_.empty()) return;
    if (!first_.back()) s_ += ',';
    first_.back() = false;
    int depth = static_cast<int>(first_.size());
    if (depth <= pretty_depth_) newline(depth);
  }
  void escape_into(const std::string& v) {
    for (unsigned char c : v) {
      switch (c) {
        case '"': s_ += "\\\""; break;
        case '\\': s_ += "\\\\"; break;
        case '\n': s_ += "\\n"; break;
        case '\r': s_ += "\\r"; break;
        case '\t': s_ += "\\t"; break;
        case '\b': s_ += "\\b"; break;
        case '\f': s_ += "\\f"; break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
            s_ += buf;
          } else {
            s_ += static_cast<char>(c);
          }
      }
    }
  }

  std::string s_;
  std::vector<bool> first_;
  bool after_key_ = false;
  int pretty_depth_;
};

}  // namespace mb
