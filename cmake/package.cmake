# What `cmake --install` gives an application that embeds orzo in its own CAF actor system:
# the static libraries as imported targets orzo::runtime and orzo::actors, the headers of
# the public API, and the package files find_package(orzo) reads (cmake/orzoConfig.cmake.in).
# The CLI and the default model install from cli/ and tools/; the HTTP server does not install.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ORZO_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/orzo)
set(ORZO_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/orzo)

set_target_properties(orzo_runtime PROPERTIES EXPORT_NAME runtime)
set_target_properties(orzo_actors PROPERTIES EXPORT_NAME actors)
if(ORZO_SANITIZE)
  # Instrumented objects call into the sanitizer runtimes, which only a link with the same
  # options brings in.
  target_link_options(orzo_runtime INTERFACE ${ORZO_SANITIZE_LINK_OPTIONS})
endif()
# A CUDA build's Engine runs CUDA stages, so its actors library links the CUDA backend: both
# CUDA libraries join the same export, and the package then needs the CUDA toolkit too.
set(ORZO_EXPORTED orzo_runtime orzo_actors)
if(ORZO_CUDA)
  set_target_properties(orzo_kernels_cuda PROPERTIES EXPORT_NAME kernels_cuda)
  set_target_properties(orzo_cuda PROPERTIES EXPORT_NAME cuda)
  list(APPEND ORZO_EXPORTED orzo_kernels_cuda orzo_cuda)
endif()
install(TARGETS ${ORZO_EXPORTED} EXPORT orzoTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${ORZO_INSTALL_INCLUDEDIR})
install(EXPORT orzoTargets NAMESPACE orzo:: DESTINATION ${ORZO_INSTALL_CMAKEDIR})

# Headers keep their paths below include/orzo, so they include each other as in the source
# tree ("actors/engine.hpp"). protocol/ and actors/ are the API; the runtime headers are
# those the API includes, as `g++ -MM` lists them, plus the exception Engine::start throws.
# The package test compiles every installed header against the install alone, so a runtime
# header the API comes to include and this list lacks fails there.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/protocol ${PROJECT_SOURCE_DIR}/actors
        DESTINATION ${ORZO_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp")
foreach(_header IN ITEMS
        runtime/load_error.hpp
        runtime/forward_batch.hpp
        runtime/layer_backend.hpp
        runtime/draw_plan.hpp
        runtime/sampler.hpp
        runtime/engine/block_manager.hpp
        runtime/engine/scheduler.hpp
        runtime/engine/sequence.hpp)
  get_filename_component(_dir ${_header} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${_header} DESTINATION ${ORZO_INSTALL_INCLUDEDIR}/${_dir})
endforeach()

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/orzoConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/orzoConfig.cmake
                              INSTALL_DESTINATION ${ORZO_INSTALL_CMAKEDIR})
# 0.x: a minor release may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/orzoConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/orzoConfig.cmake ${PROJECT_BINARY_DIR}/orzoConfigVersion.cmake
        DESTINATION ${ORZO_INSTALL_CMAKEDIR})
# Debian's CAF 0.17 ships no CMake package; the config finds it with orzo's own module.
install(FILES ${CMAKE_CURRENT_LIST_DIR}/FindCAF.cmake DESTINATION ${ORZO_INSTALL_CMAKEDIR}/modules)
