# wsbench_static_or_shared(OUT name fallback): prefer lib<name>.a so binaries carry no extra .so.
function(wsbench_static_or_shared out name fallback)
  find_library(${out}_STATIC NAMES lib${name}.a)
  if(${out}_STATIC)
    set(${out} ${${out}_STATIC} PARENT_SCOPE)
  else()
    set(${out} ${fallback} PARENT_SCOPE)
  endif()
endfunction()

# wsbench_add_library(name dir DEPS ...): one static library per source folder (globbed, so parallel work on
# sibling folders never edits a shared list). CUDA sources (*.cu) join only when CUDA is enabled.
function(wsbench_add_library name dir)
  cmake_parse_arguments(A "" "" "DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${dir}/*.cpp)
  if(WSBENCH_HAVE_CUDA)
    file(GLOB cu_srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${dir}/*.cu)
    list(APPEND srcs ${cu_srcs})
  endif()
  if(NOT srcs)  # a folder whose sources are still to be written
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${name} INTERFACE ${A_DEPS})
    return()
  endif()
  add_library(${name} STATIC ${srcs})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${A_DEPS})
  if(WSBENCH_HAVE_CUDA)
    target_compile_definitions(${name} PUBLIC WSBENCH_HAVE_CUDA=1)
  endif()
endfunction()

# wsbench_add_tests(dir DEPS ...): one GoogleTest executable per tests/<dir>/test_*.cpp file,
# named test_<dir>_<name>.
function(wsbench_add_tests dir)
  cmake_parse_arguments(A "" "" "DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/test_*.cpp)
  foreach(src ${srcs})
    get_filename_component(stem ${src} NAME_WE)
    string(REPLACE "/" "_" prefix ${dir})
    string(REGEX REPLACE "^test_" "" name ${stem})  # tests/engine/test_refit.cpp -> test_engine_refit
    set(exe test_${prefix}_${name})
    add_executable(${exe} ${src})
    target_link_libraries(${exe} PRIVATE ${A_DEPS} GTest::gtest GTest::gtest_main)
    target_compile_definitions(${exe} PRIVATE
      WSBENCH_FIXTURES_DIR="${PROJECT_SOURCE_DIR}/tests/fixtures"
      WSBENCH_PROFILES_DIR="${PROJECT_SOURCE_DIR}/models/profiles"
      WSBENCH_BINARY_DIR="${PROJECT_BINARY_DIR}")
    gtest_discover_tests(${exe} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS ${prefix})
  endforeach()
endfunction()
