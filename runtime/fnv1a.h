// FNV-1a, 64 bits, streaming. Every step is a bijection of the state, so a
// change of any one byte always changes the result; not a cryptographic hash
// (it detects damage and change, not tampering).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace pf {

class Fnv1a64 {
 public:
  Fnv1a64& add(const void* data, size_t n) {
    const unsigned char* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 0x100000001b3ull;
    return *this;
  }
  Fnv1a64& add(const std::string& s) { return add(s.data(), s.size()); }
  uint64_t value() const { return h_; }
  std::string hex() const {  // 16 lower-case hex digits
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h_));
    return buf;
  }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

}  // namespace pf
