# pf_add_module(<target> [RECURSE]): a static library of the folder's *.cc
# files, plus its *.cu files when the CUDA backend is built (files ending
# _nocuda.cc are the stand-ins compiled only without it).
function(pf_add_module target)
  cmake_parse_arguments(M "RECURSE" "" "" ${ARGN})
  set(glob GLOB)
  if(M_RECURSE)
    set(glob GLOB_RECURSE)
  endif()
  file(${glob} sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  if(PF_HAVE_CUDA)
    list(FILTER sources EXCLUDE REGEX "_nocuda\\.cc$")
    file(${glob} cuda_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cu)
    list(APPEND sources ${cuda_sources})
  endif()
  add_library(${target} STATIC ${sources})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
endfunction()
