// The resident FAVOR+ kernels with TF32 operands
// (favor_attention_cuda_resident.cuh), compiled in a file of their own so
// that nvcc builds them beside the rest of the op; the launches of
// favor_attention_cuda.cu take them through resident_kernel_tf32.
// Every block routine of this file takes its products in this precision
// (favor_attention_cuda_tiles.cuh: tile_math).
#define PF_FAVOR_TILE_MATH TileMath::Tf32
#include "kernels/favor_attention/favor_attention_cuda_resident.cuh"

namespace pf {
namespace favor_cuda {

TileKernel resident_kernel_tf32(const Dims& D, Resident which) { return resident_kernel<TileMath::Tf32>(D, which); }

}  // namespace favor_cuda
}  // namespace pf
