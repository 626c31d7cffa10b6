// The arithmetic of a CUDA kernel's tile products: the operands as they are
// (fp32 FMAs), or rounded to TF32 or bf16 for the tensor cores (sm_80 and
// newer), always with fp32 accumulation. CPU kernels compute in fp32
// whatever is asked.
#pragma once

#include <cstdint>

namespace pf {

enum class TileMath : uint8_t {
  Fp32,  // fp32 operands and FMAs
  Tf32,  // operands rounded to TF32 (10 stored mantissa bits, to nearest, ties away)
  Bf16,  // operands rounded to bf16 (7 stored mantissa bits, to nearest even)
};

inline const char* tile_math_name(TileMath m) {
  switch (m) {
    case TileMath::Fp32: return "fp32";
    case TileMath::Tf32: return "tf32";
    case TileMath::Bf16: return "bf16";
  }
  return "?";
}

}  // namespace pf
