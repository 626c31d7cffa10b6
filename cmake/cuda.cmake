# Optional CUDA backend. PF_CUDA=AUTO compiles it whenever nvcc exists (no GPU is
# needed to build); ON makes a missing toolkit an error; OFF skips it.
# CMAKE_CUDA_ARCHITECTURES picks the targets; CI builds one. CUDA 13 dropped
# sm_70, so V100 clusters build with CUDA 12 and -DCMAKE_CUDA_ARCHITECTURES=70.
set(PF_HAVE_CUDA OFF)
if(NOT PF_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures")
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    # NCCL: $NCCL_ROOT or $NCCL_HOME, the CUDA toolkit, the system (Debian's
    # and Ubuntu's libnccl-dev), or the Python wheel nvidia-nccl-cu* that
    # PyTorch images carry (nvidia/nccl/{include,lib}, only libnccl.so.2).
    set(_pf_nccl_hints $ENV{NCCL_ROOT} $ENV{NCCL_HOME} ${CUDAToolkit_LIBRARY_ROOT} /usr/local/cuda)
    find_package(Python3 COMPONENTS Interpreter QUIET)
    if(Python3_Interpreter_FOUND)
      execute_process(COMMAND ${Python3_EXECUTABLE} -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])"
                      OUTPUT_VARIABLE _pf_nccl_wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      if(_pf_nccl_wheel)
        list(APPEND _pf_nccl_hints ${_pf_nccl_wheel})
      endif()
    endif()
    find_path(PF_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ${_pf_nccl_hints} PATH_SUFFIXES include)
    find_library(PF_NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${CUDAToolkit_LIBRARY_DIR} ${_pf_nccl_hints}
                 PATH_SUFFIXES lib lib64)
    if(NOT PF_NCCL_INCLUDE_DIR OR NOT PF_NCCL_LIBRARY)
      message(FATAL_ERROR "CUDA found but NCCL (nccl.h, libnccl) was not, in NCCL_ROOT, NCCL_HOME, the CUDA toolkit, "
                          "the system or the nvidia-nccl Python wheel; set PF_NCCL_INCLUDE_DIR/PF_NCCL_LIBRARY or PF_CUDA=OFF")
    endif()
    # NCCL 2.12 or newer (V100 clusters often have an older NCCL than CUDA 13's;
    # runtime/comm_nccl.cu falls back where 2.13's and 2.18's calls are missing).
    file(STRINGS "${PF_NCCL_INCLUDE_DIR}/nccl.h" _pf_nccl_version REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
    string(REGEX REPLACE ".*NCCL_MAJOR +([0-9]+).*" "\\1" _pf_nccl_major "${_pf_nccl_version}")
    string(REGEX REPLACE ".*NCCL_MINOR +([0-9]+).*" "\\1" _pf_nccl_minor "${_pf_nccl_version}")
    set(PF_NCCL_VERSION "${_pf_nccl_major}.${_pf_nccl_minor}")
    if(PF_NCCL_VERSION VERSION_LESS 2.12)
      message(FATAL_ERROR "NCCL ${PF_NCCL_VERSION} in ${PF_NCCL_INCLUDE_DIR} is older than the 2.12 this build needs")
    endif()
    message(STATUS "performer: NCCL ${PF_NCCL_VERSION} (${PF_NCCL_LIBRARY})")
    add_library(pf_nccl UNKNOWN IMPORTED)
    set_target_properties(pf_nccl PROPERTIES IMPORTED_LOCATION "${PF_NCCL_LIBRARY}"
                          INTERFACE_INCLUDE_DIRECTORIES "${PF_NCCL_INCLUDE_DIR}")
    set(PF_HAVE_CUDA ON)
  elseif(PF_CUDA STREQUAL "ON")
    message(FATAL_ERROR "PF_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
message(STATUS "performer: CUDA backend ${PF_HAVE_CUDA} (architectures: ${CMAKE_CUDA_ARCHITECTURES})")
