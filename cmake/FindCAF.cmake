# Debian's libcaf-dev 0.17.6 ships neither a CMake package nor a .pc file. This module
# creates the imported targets CAF >= 0.18 exports (CAF::core, CAF::io, CAF::openssl) so the
# consuming CMakeLists stays the same after an upgrade. Libraries are found by exact name:
# libcaf_openmpi.so on Debian is Co-Array Fortran, never glob libcaf_*.
include(FindPackageHandleStandardArgs)
find_package(Threads REQUIRED)
find_path(CAF_INCLUDE_DIR NAMES caf/config.hpp)
if(CAF_INCLUDE_DIR)
  file(STRINGS "${CAF_INCLUDE_DIR}/caf/config.hpp" _caf_v REGEX "^#define CAF_VERSION [0-9]+")
  string(REGEX REPLACE ".*CAF_VERSION ([0-9]+).*" "\\1" _caf_v "${_caf_v}")
  math(EXPR _caf_major "${_caf_v} / 10000")
  math(EXPR _caf_minor "(${_caf_v} / 100) % 100")
  math(EXPR _caf_patch "${_caf_v} % 100")
  set(CAF_VERSION "${_caf_major}.${_caf_minor}.${_caf_patch}")
endif()
if(NOT CAF_FIND_COMPONENTS)
  set(CAF_FIND_COMPONENTS core)
endif()
foreach(_c IN LISTS CAF_FIND_COMPONENTS)
  find_library(CAF_${_c}_LIBRARY NAMES caf_${_c})
  if(CAF_${_c}_LIBRARY)
    set(CAF_${_c}_FOUND TRUE)
    if(NOT TARGET CAF::${_c})
      add_library(CAF::${_c} SHARED IMPORTED)
      set_target_properties(CAF::${_c} PROPERTIES
        IMPORTED_LOCATION "${CAF_${_c}_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
        INTERFACE_LINK_LIBRARIES Threads::Threads)
    endif()
  endif()
endforeach()
if(TARGET CAF::io AND TARGET CAF::core)
  set_property(TARGET CAF::io APPEND PROPERTY INTERFACE_LINK_LIBRARIES CAF::core)
endif()
if(TARGET CAF::openssl AND TARGET CAF::io)
  set_property(TARGET CAF::openssl APPEND PROPERTY INTERFACE_LINK_LIBRARIES CAF::io)
endif()
find_package_handle_standard_args(CAF REQUIRED_VARS CAF_INCLUDE_DIR
  VERSION_VAR CAF_VERSION HANDLE_COMPONENTS)
