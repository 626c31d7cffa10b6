# Third-party dependencies, found the CMake way. All come from Debian 12 packages
# (see README.md for the list that setup installs).
find_package(MPI REQUIRED COMPONENTS C CXX)
find_package(HDF5 REQUIRED COMPONENTS C)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(ZLIB REQUIRED)
find_package(Threads REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(TOMLPP REQUIRED IMPORTED_TARGET tomlplusplus)

# CPU GEMM: oneDNN's sgemm (run-time ISA dispatch) when present, else CBLAS from
# OpenBLAS. oneDNN is preferred because it picks its kernels by CPUID at run
# time; see docs/benchmarks/gemm.md for the measurement behind the choice.
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_path(PF_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas openblas-pthread)
# oneDNN is found by its header and library, never by its CMake config:
# Debian's dnnl-config.cmake is built with the OpenCL GPU runtime and makes
# OpenCL's development files REQUIRED, which a QUIET find cannot soften, so an
# optional piece we do not use would stop the whole configure.
find_path(PF_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.h)
find_library(PF_DNNL_LIBRARY dnnl)
set(dnnl_FOUND FALSE)
if(PF_DNNL_INCLUDE_DIR AND PF_DNNL_LIBRARY)
  add_library(DNNL::dnnl UNKNOWN IMPORTED)
  set_target_properties(DNNL::dnnl PROPERTIES IMPORTED_LOCATION "${PF_DNNL_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${PF_DNNL_INCLUDE_DIR}")
  set(dnnl_FOUND TRUE)
endif()
message(STATUS "performer: oneDNN sgemm ${dnnl_FOUND}, CBLAS at ${PF_CBLAS_INCLUDE_DIR}")

if(PF_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(PF_BUILD_BENCH)
  find_package(benchmark QUIET)
endif()
