// Whether two paths name one file, for the tools that must never write their
// output over one of their inputs (performer-data prepare, performer-attn).
#pragma once

#include <string>

namespace pf {

// True when `a` and `b` name the same file: the same device and inode when
// both exist (so symbolic links, hard links and spellings such as "./x" or
// "d/../x" are seen through), otherwise the same absolute, normalised path
// (weakly_canonical).
bool same_file(const std::string& a, const std::string& b);

}  // namespace pf
