// "16GiB", "512M", "1000000" -> bytes (units B, K/KiB, M/MiB, G/GiB,
// T/TiB, powers of 1024); ConfigError naming `key` and the text otherwise.
#pragma once

#include <cstdint>
#include <string>

namespace pf {

int64_t parse_byte_size(const std::string& text, const std::string& key);

}  // namespace pf
