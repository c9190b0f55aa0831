// JSON written straight to text, in the bytes nlohmann's dump() gives the same document
// as a tree (compact, object keys sorted, its number formatting): the canonical scenario
// and the prediction are serialised once per sweep point, and building them as trees
// only to dump them was about 40% of a point (results/README.md, benchmark). Their
// to_json trees are parsed from this text, so there is one serialiser.
//
// Members may be written in any order: an object's members are put in key order when
// it is closed (std::string's order, as nlohmann's std::map), so a writer cannot emit
// an unsorted object. Keys are identifiers written by code: a key that would need an
// escape or repeats within its object is a logic_error.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace clustersim {

// Appends nlohmann::json(s).dump() (the quoted, escaped string) to `out`; a string that
// is not valid UTF-8 throws nlohmann's type_error as dump() does.
void append_json_string(std::string& out, std::string_view s);
// Appends nlohmann::json(x).dump(): shortest round-trip digits, "null" when not finite.
void append_json_number(std::string& out, double x);
void append_json_number(std::string& out, std::int64_t x);
void append_json_number(std::string& out, std::uint64_t x);

class JsonWriter {
 public:
  // A closed object's member: its key and where its value's text lies in text().
  struct Member {
    std::string_view key;  // into text()
    std::size_t begin = 0, end = 0;
  };

  explicit JsonWriter(std::string& out) : out_(out) {}

  void begin_object();
  // Sorts the members by key; `members`, when given, receives their spans (final).
  void end_object(std::vector<Member>* members = nullptr);
  void begin_array();
  void end_array();
  // The next value is the member `k` of the open object.
  void key(std::string_view k);

  void null();
  // A value already serialised (compact, keys sorted: one of this writer's texts or a
  // dump()), copied as it is.
  void raw(std::string_view json);
  void value(bool b);
  void value(std::string_view s);
  void value(const std::string& s) { value(std::string_view(s)); }
  void value(const char* s) { value(std::string_view(s)); }
  // Integers are written as integers and floating-point numbers as nlohmann writes a
  // double ("2.0", not "2"), as the tree of the same C++ value would be.
  template <class T, std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, bool>, int> = 0>
  void value(T x) {
    before_value();
    if constexpr (std::is_floating_point_v<T>) append_json_number(out_, static_cast<double>(x));
    else if constexpr (std::is_signed_v<T>) append_json_number(out_, static_cast<std::int64_t>(x));
    else append_json_number(out_, static_cast<std::uint64_t>(x));
    after_value();
  }
  template <class T>
  void value(const std::vector<T>& v) {
    begin_array();
    for (const auto& x : v) value(x);
    end_array();
  }
  template <class T>
  void member(std::string_view k, const T& v) {
    key(k);
    value(v);
  }

  std::string& text() { return out_; }

 private:
  struct Frame {
    bool object = false;
    std::size_t first = 0;   // offset of the first member or element
    std::size_t members = 0; // index into members_ of this object's first member
    bool empty = true;
  };
  struct Span {
    std::size_t key_begin = 0, key_end = 0;  // the key's characters, quotes excluded
    std::size_t value_begin = 0, end = 0;
  };
  void before_value();
  void after_value();

  std::string& out_;
  std::vector<Frame> stack_;
  std::vector<Span> members_;  // members of the open objects, innermost last
  bool have_key_ = false;
  std::string scratch_;
};

}  // namespace clustersim
