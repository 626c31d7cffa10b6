// PF_HD marks per-element math shared by the CPU and CUDA backends, so the two
// cannot drift: __host__ __device__ under nvcc, nothing otherwise.
#pragma once

#if defined(__CUDACC__)
#define PF_HD __host__ __device__ __forceinline__
#else
#define PF_HD inline
#endif
