// json.dump() (compact, strict UTF-8) without nlohmann's serializer, byte for byte the
// same text: nlohmann's per-byte UTF-8 state machine made dumping a quarter of a
// sweep's instructions (callgrind). Strings and numbers are written by the same
// functions as scenarios/json_writer (nlohmann's own shortest round-trip formatting; a
// string with a non-ASCII byte is handed to nlohmann whole, so invalid UTF-8 throws as
// dump() does).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace clustersim::results {

// Appends j.dump() to `out`.
void append_dump(std::string& out, const nlohmann::json& j);
// Appends nlohmann::json(s).dump() (the quoted, escaped string) to `out`.
void append_string(std::string& out, const std::string& s);
inline std::string dump(const nlohmann::json& j) {
  std::string out;
  append_dump(out, j);
  return out;
}

}  // namespace clustersim::results
