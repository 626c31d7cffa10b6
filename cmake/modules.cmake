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
  pf_unity_build(${target})
endfunction()

# pf_unity_build(<target>): a library's or test binary's *.cc files compile
# as units of 8 (CMake's unity build), its *.cu files one by one (the FAVOR+
# resident files define their precision before the headers; nvcc's files
# are few and long); a target of one .cc file is left as it is. Most of a
# short .cc file's compile time is the headers it shares with its
# neighbours: pf_launch's 44 files took 254 s of one core of the 2-core AMD
# EPYC VM, 89 s as 6 units; test_data's 15 files 79 s, 28 s as 2 units. So
# the anonymous namespaces of the files of one target must not reuse a name.
function(pf_unity_build target)
  get_target_property(sources ${target} SOURCES)
  set(cuda_sources ${sources})
  list(FILTER cuda_sources INCLUDE REGEX "\\.cu$")
  list(FILTER sources EXCLUDE REGEX "\\.cu$")
  list(LENGTH sources count)
  if(count LESS 2)
    return()
  endif()
  if(cuda_sources)
    set_source_files_properties(${cuda_sources} TARGET_DIRECTORY ${target} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
  endif()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON)
endfunction()
