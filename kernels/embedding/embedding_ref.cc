// float64 reference embedding: Y[T,C] = table[ids[t], :]; dTable[V,C] += scatter of dY.
#include "kernels/embedding/embedding.h"
#include "runtime/check.h"

namespace pf {

void embedding_forward_ref(const int32_t* ids, const double* table, double* Y, int64_t T, int64_t V, int64_t C) {
  for (int64_t t = 0; t < T; ++t) {
    PF_REQUIRE(ValueError, ids[t] >= 0 && ids[t] < V, "embedding: token " << t << " has id " << ids[t] << ", V=" << V);
    for (int64_t c = 0; c < C; ++c) Y[t * C + c] = table[ids[t] * C + c];
  }
}

void embedding_backward_ref(const int32_t* ids, const double* dY, double* dTable, int64_t T, int64_t V, int64_t C) {
  for (int64_t t = 0; t < T; ++t) {
    PF_REQUIRE(ValueError, ids[t] >= 0 && ids[t] < V, "embedding: token " << t << " has id " << ids[t] << ", V=" << V);
    for (int64_t c = 0; c < C; ++c) dTable[ids[t] * C + c] += dY[t * C + c];
  }
}

}  // namespace pf
