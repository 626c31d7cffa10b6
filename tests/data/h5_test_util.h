// A 1-D int64 dataset declared with `n` elements and no data written (chunked
// by `chunk`, contiguous when 0): what a crafted or damaged file declares,
// for the tests that readers refuse it before they allocate or read it.
#pragma once

#include <hdf5.h>

#include "data/h5.h"

namespace pf::test {

inline H5Id declare_int64_dataset(hid_t loc, const char* name, hsize_t n, hsize_t chunk) {
  const hsize_t dims[1] = {n};
  H5Id space(H5Screate_simple(1, dims, nullptr));
  H5Id dcpl(H5Pcreate(H5P_DATASET_CREATE));
  if (chunk) H5Pset_chunk(dcpl, 1, &chunk);
  return H5Id(H5Dcreate2(loc, name, H5T_STD_I64LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
}

}  // namespace pf::test
