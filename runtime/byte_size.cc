// Byte sizes from text: see byte_size.h.
#include "runtime/byte_size.h"

#include <cctype>
#include <cmath>
#include <exception>

#include "runtime/check.h"

namespace pf {

int64_t parse_byte_size(const std::string& text, const std::string& key) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (const std::exception&) {
    PF_REQUIRE(ConfigError, false, key << ": cannot read a byte size from '" << text << "'");
  }
  std::string unit = text.substr(pos);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.front()))) unit.erase(0, 1);
  double mult = 1;
  if (unit.empty() || unit == "B")
    mult = 1;
  else if (unit == "KiB" || unit == "K")
    mult = 1024.0;
  else if (unit == "MiB" || unit == "M")
    mult = 1024.0 * 1024;
  else if (unit == "GiB" || unit == "G")
    mult = 1024.0 * 1024 * 1024;
  else if (unit == "TiB" || unit == "T")
    mult = 1024.0 * 1024 * 1024 * 1024;
  else
    PF_REQUIRE(ConfigError, false,
               key << ": unknown unit '" << unit << "' in '" << text << "' (B, KiB, MiB, GiB, TiB)");
  PF_REQUIRE(ConfigError, std::isfinite(v), key << ": '" << text << "' is not a size (a number with a unit)");
  PF_REQUIRE(ConfigError, v >= 0, key << ": negative size '" << text << "'");
  // 2^62 bytes (4 EiB): far above any memory, and v * mult stays exact in int64.
  constexpr double kLargest = 4611686018427387904.0;
  PF_REQUIRE(ConfigError, v * mult < kLargest,
             key << ": '" << text << "' is larger than the largest size accepted (4 EiB)");
  return static_cast<int64_t>(v * mult);
}

}  // namespace pf
