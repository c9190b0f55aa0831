#include "results/json_text.hpp"

#include <array>
#include <charconv>
#include <cmath>

namespace clustersim::results {

void append_string(std::string& out, const std::string& s) {
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
      out += nlohmann::json(s).dump();  // validates UTF-8 and throws as dump() does
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

void append_dump(std::string& out, const nlohmann::json& j) {
  using T = nlohmann::json::value_t;
  switch (j.type()) {
    case T::object: {
      if (j.empty()) {
        out += "{}";
        return;
      }
      char sep = '{';
      for (auto it = j.begin(); it != j.end(); ++it) {
        out += sep;
        sep = ',';
        append_string(out, it.key());
        out += ':';
        append_dump(out, it.value());
      }
      out += '}';
      return;
    }
    case T::array: {
      if (j.empty()) {
        out += "[]";
        return;
      }
      char sep = '[';
      for (const auto& v : j) {
        out += sep;
        sep = ',';
        append_dump(out, v);
      }
      out += ']';
      return;
    }
    case T::string: append_string(out, j.get_ref<const std::string&>()); return;
    case T::boolean: out += j.get<bool>() ? "true" : "false"; return;
    case T::number_integer:
    case T::number_unsigned: {
      std::array<char, 24> buf;
      const auto r = j.type() == T::number_integer
                         ? std::to_chars(buf.data(), buf.data() + buf.size(), j.get<std::int64_t>())
                         : std::to_chars(buf.data(), buf.data() + buf.size(), j.get<std::uint64_t>());
      out.append(buf.data(), r.ptr);
      return;
    }
    case T::number_float: {
      const double x = j.get<double>();
      if (!std::isfinite(x)) {
        out += "null";
        return;
      }
      std::array<char, 64> buf;  // nlohmann's serializer uses the same formatter and buffer size
      out.append(buf.data(), nlohmann::detail::to_chars(buf.data(), buf.data() + buf.size(), x));
      return;
    }
    case T::null: out += "null"; return;
    default: out += j.dump(); return;  // binary, discarded: never in a stored document
  }
}

}  // namespace clustersim::results
