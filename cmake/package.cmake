# What `cmake --install` gives an application that embeds orzo in its own CAF actor system:
# the static libraries as imported targets (orzo::actors and the parts below it), the headers of
# the public API, and the package files find_package(orzo) reads (cmake/orzoConfig.cmake.in).
# The CLI and its default model install from cli/; the HTTP server does not install.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ORZO_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/orzo)
set(ORZO_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/orzo)

# Every part the actors link goes into the export, each under its folder's name (orzo::core,
# orzo::runtime, ...); an application links orzo::actors and gets the rest through it.
set(ORZO_EXPORTED orzo_core orzo_kernels_cpu orzo_formats orzo_grammar orzo_batching orzo_text orzo_runtime orzo_stages
    orzo_protocol orzo_actors)
# A CUDA build's stage factory makes CUDA stages, so the CUDA backend and its kernels join the
# export, and the package then needs the CUDA toolkit too.
if(ORZO_CUDA)
  list(APPEND ORZO_EXPORTED orzo_kernels_cuda orzo_cuda)
endif()
foreach(_target IN LISTS ORZO_EXPORTED)
  string(REGEX REPLACE "^orzo_" "" _name ${_target})
  set_target_properties(${_target} PROPERTIES EXPORT_NAME ${_name})
endforeach()
if(ORZO_SANITIZE)
  # Instrumented objects call into the sanitizer runtimes, which only a link with the same
  # options brings in.
  target_link_options(orzo_core INTERFACE ${ORZO_SANITIZE_LINK_OPTIONS})
endif()
install(TARGETS ${ORZO_EXPORTED} EXPORT orzoTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${ORZO_INSTALL_INCLUDEDIR})
install(EXPORT orzoTargets NAMESPACE orzo:: DESTINATION ${ORZO_INSTALL_CMAKEDIR})

# Headers keep their paths below include/orzo, so they include each other as in the source
# tree ("actors/engine.hpp"). protocol/ and actors/ are the API; the other headers are those
# the API includes, as `g++ -MM` lists them, plus the exception Engine::start throws.
# The package test compiles every installed header against the install alone, so a header
# the API comes to include and this list lacks fails there.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/protocol ${PROJECT_SOURCE_DIR}/actors
        DESTINATION ${ORZO_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp")
foreach(_header IN ITEMS
        core/draw_plan.hpp
        core/dtype.hpp
        core/forward_batch.hpp
        core/kv_layout.hpp
        core/layer_range.hpp
        core/load_error.hpp
        core/sampling_params.hpp
        core/stage_terms.hpp
        core/token_mask.hpp
        kernels/cpu/matmul_options.hpp
        runtime/layer_backend.hpp
        runtime/sampler.hpp
        batching/block_manager.hpp
        batching/block_set.hpp
        batching/scheduler.hpp
        batching/sequence.hpp
        stages/placement.hpp
        stages/stage_factory.hpp)
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
