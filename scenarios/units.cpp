// Unit parsing: one table of suffixes per dimension; decimal (K=1e3) and binary
// (Ki=2^10) prefixes; bits ("b") versus bytes ("B") for sizes and bandwidths.
#include "scenarios/units.hpp"

#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>

namespace clustersim {
namespace {

struct Unit {
  std::string_view suffix;
  double factor;
};

// Longest suffixes first is not needed: the whole remainder must equal a suffix.
constexpr std::array time_units{
    Unit{"s", 1.0}, Unit{"ms", 1e-3}, Unit{"us", 1e-6}, Unit{"ns", 1e-9}, Unit{"min", 60.0},
};

constexpr std::array byte_units{
    Unit{"B", 1.0},           Unit{"KB", 1e3},          Unit{"MB", 1e6},
    Unit{"GB", 1e9},          Unit{"TB", 1e12},         Unit{"KiB", 1024.0},
    Unit{"MiB", 1048576.0},   Unit{"GiB", 1073741824.0}, Unit{"TiB", 1099511627776.0},
};

constexpr std::array bandwidth_units{
    Unit{"Bps", 1.0},       Unit{"KBps", 1e3},       Unit{"MBps", 1e6},
    Unit{"GBps", 1e9},      Unit{"TBps", 1e12},      Unit{"KiBps", 1024.0},
    Unit{"MiBps", 1048576.0}, Unit{"GiBps", 1073741824.0},
    Unit{"bps", 0.125},     Unit{"Kbps", 125.0},     Unit{"Mbps", 1.25e5},
    Unit{"Gbps", 1.25e8},   Unit{"Tbps", 1.25e11},
    Unit{"B/s", 1.0},       Unit{"KB/s", 1e3},       Unit{"MB/s", 1e6},
    Unit{"GB/s", 1e9},      Unit{"TB/s", 1e12},      Unit{"Gb/s", 1.25e8},
};

constexpr std::array flop_rate_units{
    Unit{"FLOPs", 1.0},  Unit{"GFLOPs", 1e9},  Unit{"TFLOPs", 1e12}, Unit{"PFLOPs", 1e15},
    Unit{"FLOP/s", 1.0}, Unit{"GFLOP/s", 1e9}, Unit{"TFLOP/s", 1e12}, Unit{"PFLOP/s", 1e15},
};

template <std::size_t N>
std::optional<double> lookup(const std::array<Unit, N>& units, std::string_view suffix) {
  for (const auto& u : units)
    if (u.suffix == suffix) return u.factor;
  return std::nullopt;
}

std::optional<double> factor_for(Dimension dim, std::string_view suffix) {
  switch (dim) {
    case Dimension::time: return lookup(time_units, suffix);
    case Dimension::bytes: return lookup(byte_units, suffix);
    case Dimension::bandwidth: return lookup(bandwidth_units, suffix);
    case Dimension::flop_rate: return lookup(flop_rate_units, suffix);
  }
  return std::nullopt;
}

// Length of the decimal number at the start of `s` ("-1.5e3" of "-1.5e3GBps"), 0 when
// there is none: sign, digits, an optional fraction and an optional exponent.
std::size_t decimal_length(std::string_view s) {
  std::size_t i = 0;
  const auto digits = [&] {
    const std::size_t from = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    return i - from;
  };
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  std::size_t mantissa = digits();
  if (i < s.size() && s[i] == '.') {
    ++i;
    mantissa += digits();
  }
  if (mantissa == 0) return 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    const std::size_t before = i;
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) i = before;  // "2e" is not an exponent: leave it to the unit
  }
  return i;
}

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace

std::string_view dimension_name(Dimension dim) {
  switch (dim) {
    case Dimension::time: return "a duration";
    case Dimension::bytes: return "a size";
    case Dimension::bandwidth: return "a bandwidth";
    case Dimension::flop_rate: return "a FLOP rate";
  }
  return "a quantity";
}

std::string_view unit_examples(Dimension dim) {
  switch (dim) {
    case Dimension::time: return "s, ms, us, ns (e.g. \"2us\")";
    case Dimension::bytes: return "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB (e.g. \"80GiB\")";
    case Dimension::bandwidth:
      return "Bps, KBps, MBps, GBps, TBps for bytes/s or bps, Kbps, Mbps, Gbps, Tbps for bits/s "
             "(e.g. \"450GBps\", \"400Gbps\")";
    case Dimension::flop_rate: return "FLOPs, GFLOPs, TFLOPs, PFLOPs (e.g. \"312TFLOPs\")";
  }
  return "";
}

std::optional<double> parse_quantity(std::string_view text, Dimension dim, std::string* error) {
  const std::string s = trim(text);
  const char* begin = s.c_str();
  // Only a plain decimal number: strtod alone would also take hex ("0x10Gbps"), "inf"
  // and "nan", none of which a person means in a scenario.
  const std::size_t length = decimal_length(s);
  char* end = nullptr;
  const double value = length == 0 ? 0.0 : std::strtod(begin, &end);
  if (length > 0 && end != begin + length) {
    if (error)
      *error = fmt::format("\"{}\" is not a decimal number followed by a unit (hexadecimal and other forms are "
                           "not accepted); write it like {}",
                           s, unit_examples(dim));
    return std::nullopt;
  }
  if (length == 0) {
    if (error)
      *error = fmt::format("expected {} like a number followed by a unit ({}), got \"{}\"",
                           dimension_name(dim), unit_examples(dim), s);
    return std::nullopt;
  }
  const std::string suffix = trim(std::string_view(end));
  if (suffix.empty()) {
    if (error)
      *error = fmt::format("\"{}\" has no unit; append one of {}", s, unit_examples(dim));
    return std::nullopt;
  }
  const auto factor = factor_for(dim, suffix);
  if (!factor) {
    if (error)
      *error = fmt::format("unknown unit \"{}\" in \"{}\" for {}; use one of {}", suffix, s,
                           dimension_name(dim), unit_examples(dim));
    return std::nullopt;
  }
  const double si = value * *factor;
  if (!std::isfinite(si) || si < 0) {
    if (error) *error = fmt::format("expected a finite value >= 0, got \"{}\"", s);
    return std::nullopt;
  }
  return si;
}

std::string format_quantity(double si, Dimension dim) {
  switch (dim) {
    case Dimension::time: return format_seconds(si);
    case Dimension::bytes: return format_bytes(si);
    case Dimension::bandwidth: return format_bandwidth(si);
    case Dimension::flop_rate: return format_flop_rate(si);
  }
  return fmt::format("{}", si);
}

namespace {
std::string scaled(double v, const char* const* names, int count, double step) {
  int i = 0;
  while (i + 1 < count && std::fabs(v) >= step) {
    v /= step;
    ++i;
  }
  return fmt::format("{:.3g} {}", v, names[i]);
}
}  // namespace

std::string format_seconds(Seconds s) {
  if (s >= 1.0) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.3f} us", s * 1e6);
}

std::string format_bytes(Bytes b) {
  static const char* names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  return scaled(b, names, 6, 1024.0);
}

std::string format_bandwidth(BytesPerSecond b) {
  static const char* names[] = {"B/s", "KB/s", "MB/s", "GB/s", "TB/s"};
  return scaled(b, names, 5, 1000.0);
}

std::string format_flop_rate(FlopPerSecond f) {
  static const char* names[] = {"FLOP/s", "KFLOP/s", "MFLOP/s", "GFLOP/s", "TFLOP/s", "PFLOP/s"};
  return scaled(f, names, 6, 1000.0);
}

}  // namespace clustersim
