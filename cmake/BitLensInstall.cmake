# Install rules and the CPack .deb (`make package`; README "Install from the .deb").
#   bin/bitlens, bin/bitlens-cli       RPATH $ORIGIN/../lib/bitlens
#   lib/bitlens/                       the LibTorch libraries they load (libtorch_cpu, libc10,
#                                      torch's libgomp, the CUDA runtime libtorch_cpu links),
#                                      found at install time from the binaries' dependencies
#   share/applications, share/metainfo, share/mime/packages, share/icons/hicolor
#   share/bitlens/hardware/accelerators.json   the planner's cards (bitlens-cli plan)
#   share/bitlens/consumers/run_consumer.py     export --verify's consumer runner (onnxruntime, llama.cpp, transformers)
# Everything else (Qt 6, zlib, libstdc++) comes from Debian: the .deb's Depends are worked out
# by dpkg-shlibdeps from the installed binaries.
set(BITLENS_PRIVATE_LIBDIR lib/bitlens)

set(_bitlens_programs bitlens-cli)
if(TARGET bitlens)
  list(APPEND _bitlens_programs bitlens)
endif()
set_target_properties(${_bitlens_programs} PROPERTIES INSTALL_RPATH "$ORIGIN/../${BITLENS_PRIVATE_LIBDIR}")
install(TARGETS ${_bitlens_programs} RUNTIME_DEPENDENCY_SET bitlens_runtime
  RUNTIME DESTINATION bin COMPONENT bitlens)

# Only the libraries that come with torch (its wheel's lib folder and the nvidia-* wheels beside
# it) are copied; system libraries are the system's. libtorch_cpu finds its own neighbours
# through its RPATH ($ORIGIN), so they all go into one folder.
get_filename_component(_site ${BITLENS_TORCH_DIR}/.. ABSOLUTE)
string(REGEX REPLACE "([][+.*?()^$|\\\\])" "\\\\\\1" _site_re "${_site}")
install(RUNTIME_DEPENDENCY_SET bitlens_runtime
  DIRECTORIES ${BITLENS_TORCH_DIR}/lib
  POST_INCLUDE_REGEXES "^${_site_re}/" "/site-packages/(torch|nvidia)/"
  POST_EXCLUDE_REGEXES ".*"
  LIBRARY DESTINATION ${BITLENS_PRIVATE_LIBDIR} COMPONENT bitlens)
# install/strip (and CPack, CPACK_STRIP_FILES) strip only install(TARGETS) files; the wheel's
# libtorch_cpu keeps a 70 MB symbol table, which nothing needs at run time.
if(CMAKE_STRIP)
  install(CODE "
    if(CMAKE_INSTALL_DO_STRIP)
      file(GLOB _libs \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${BITLENS_PRIVATE_LIBDIR}/*.so*\")
      foreach(_lib \${_libs})
        execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-unneeded \"\${_lib}\" RESULT_VARIABLE _rc)
        if(NOT _rc EQUAL 0)
          message(FATAL_ERROR \"strip failed on \${_lib}\")
        endif()
      endforeach()
    endif()" COMPONENT bitlens)
endif()

# The planner's accelerator table (bitlens-cli plan, the Plan tab): share/bitlens/hardware/.
install(FILES ${CMAKE_SOURCE_DIR}/resources/hardware/accelerators.json
  DESTINATION share/bitlens/hardware COMPONENT bitlens)
# The consumer runtimes' runner of export --verify (onnxruntime, llama.cpp, transformers + compressed-tensors): share/bitlens/consumers/.
install(FILES ${CMAKE_SOURCE_DIR}/resources/consumers/run_consumer.py
  DESTINATION share/bitlens/consumers COMPONENT bitlens)

if(TARGET bitlens)
  install(FILES ${CMAKE_SOURCE_DIR}/resources/${BITLENS_APP_ID}.desktop
    DESTINATION share/applications COMPONENT bitlens)
  install(FILES ${CMAKE_SOURCE_DIR}/resources/${BITLENS_APP_ID}.metainfo.xml
    DESTINATION share/metainfo COMPONENT bitlens)
  install(FILES ${CMAKE_SOURCE_DIR}/resources/bitlens-mime.xml
    DESTINATION share/mime/packages RENAME bitlens.xml COMPONENT bitlens)
  install(FILES ${CMAKE_SOURCE_DIR}/resources/bitlens.svg
    DESTINATION share/icons/hicolor/scalable/apps COMPONENT bitlens)
  foreach(_size ${BITLENS_ICON_SIZES})
    install(FILES ${BITLENS_ICON_PNG_DIR}/${_size}.png
      DESTINATION share/icons/hicolor/${_size}x${_size}/apps RENAME bitlens.png COMPONENT bitlens)
  endforeach()
endif()

# CPack: one Debian package, bitlens_<version>_<arch>.deb, in the build folder.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME bitlens)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "BitLens")
set(CPACK_PACKAGE_CONTACT "BitLens developers <bitlens@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Quantization explorer for neural networks (GUI and CLI)")
set(CPACK_PACKAGE_DESCRIPTION
  "BitLens opens a neural network (ONNX, safetensors, GGUF, TorchScript) and a little data, \
quantizes it (int8, int4, fp8, quantization-aware training) and shows what changed, layer by \
layer. bitlens is the desktop app, bitlens-cli the same engine on the command line. LibTorch's \
CPU libraries are bundled in /usr/lib/bitlens.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends from the ELF files themselves; the bundled torch libraries are resolved in the
# staging folder (lib/bitlens), everything else against the installed Debian packages.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS
  ${CMAKE_BINARY_DIR}/_CPack_Packages/Linux/DEB/bitlens-${PROJECT_VERSION}-Linux/usr/${BITLENS_PRIVATE_LIBDIR})
# Qt's platform plugins are loaded at run time, so dpkg-shlibdeps cannot see them: offscreen
# and minimal ship in libqt6gui6, xcb and wayland in qt6-qpa-plugins (what a desktop needs).
# The demo zoo's data: Fashion-MNIST for fashion-cnn (the model `bitlens` opens when started
# without a file, trained on first use), the King James Bible (`bible`) for char-lstm.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "qt6-qpa-plugins, dataset-fashion-mnist")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "bible-kjv")
# zstd with every core: LibTorch is ~450 MB uncompressed; xz would take minutes on 2 cores.
# Debian 12's dpkg (1.21.22) reads zstd members.
set(CPACK_DEBIAN_COMPRESSION_TYPE zstd)
set(CPACK_THREADS 0)
set(CPACK_STRIP_FILES ON)
include(CPack)
