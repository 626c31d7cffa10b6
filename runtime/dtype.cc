#include "runtime/dtype.h"

#include "runtime/check.h"

namespace pf {

DType parse_dtype(const std::string& name) {
  for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i64, DType::i32, DType::u8})
    if (name == dtype_name(t)) return t;
  PF_REQUIRE(ValueError, false, "unknown dtype '" << name << "' (expected f64, f32, f16, bf16, i64, i32 or u8)");
  return DType::f32;
}

}  // namespace pf
