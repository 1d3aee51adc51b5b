# orzo_library(TARGET DIRS dir... [PUBLIC dep...] [PRIVATE dep...]): one part of the house, a
# static library of the .cpp files in its folders (relative to the calling CMakeLists.txt).
# Parts include each other by paths from the source root ("core/dtype.hpp"); which part may
# include which is what the links say, and scripts/check-layers.py holds every include to it.
function(orzo_library target)
  cmake_parse_arguments(ARG "" "" "DIRS;PUBLIC;PRIVATE" ${ARGN})
  set(globs)
  foreach(dir IN LISTS ARG_DIRS)
    list(APPEND globs ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/*.cpp)
  endforeach()
  file(GLOB sources CONFIGURE_DEPENDS ${globs})
  add_library(${target} STATIC ${sources})
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
  target_link_libraries(${target} PUBLIC ${ARG_PUBLIC} PRIVATE ${ARG_PRIVATE} $<BUILD_INTERFACE:orzo_warnings>)
  target_compile_features(${target} PUBLIC cxx_std_17)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()
