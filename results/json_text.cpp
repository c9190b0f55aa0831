#include "results/json_text.hpp"

#include "scenarios/json_writer.hpp"

namespace clustersim::results {

void append_string(std::string& out, const std::string& s) { append_json_string(out, s); }

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
    case T::number_integer: append_json_number(out, j.get<std::int64_t>()); return;
    case T::number_unsigned: append_json_number(out, j.get<std::uint64_t>()); return;
    case T::number_float: append_json_number(out, j.get<double>()); return;
    case T::null: out += "null"; return;
    default: out += j.dump(); return;  // binary, discarded: never in a stored document
  }
}

}  // namespace clustersim::results
