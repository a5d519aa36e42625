# LibTorch from the PyPI `torch` wheel in BitLens' venv (scripts/bootstrap installs it).
# Defines the interface target bitlens::torch. We link libtorch_cpu and libc10 directly
# (inside --no-as-needed, so their operator registrations run) instead of find_package(Torch):
# it needs no CUDA toolkit and keeps libtorch_cuda out of processes that do not use a GPU.
# With BITLENS_TORCH_CUDA=ON, libtorch_cuda and libc10_cuda are linked too (GPU machine).

file(STRINGS ${CMAKE_SOURCE_DIR}/scripts/versions.env _pins REGEX "^TORCH_VERSION=")
string(REGEX REPLACE "^TORCH_VERSION=" "" BITLENS_TORCH_PIN "${_pins}")

if(NOT BITLENS_TORCH_DIR)
  if(NOT BITLENS_PYTHON)
    if(DEFINED ENV{BITLENS_CACHE})
      set(_cache $ENV{BITLENS_CACHE})
    else()
      set(_cache $ENV{HOME}/.cache/bitlens)
    endif()
    if(EXISTS ${_cache}/venv/bin/python)
      set(BITLENS_PYTHON ${_cache}/venv/bin/python)
    else()
      set(BITLENS_PYTHON python3)
    endif()
  endif()
  # Ask the interpreter where torch lives without importing it (import takes seconds).
  execute_process(
    COMMAND ${BITLENS_PYTHON} -c
      "import importlib.util,os;s=importlib.util.find_spec('torch');print(os.path.dirname(s.origin) if s else '')"
    OUTPUT_VARIABLE _torch_dir OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0 OR NOT _torch_dir)
    message(FATAL_ERROR "BitLens: no torch found for ${BITLENS_PYTHON}. Run scripts/bootstrap, "
                        "or pass -DBITLENS_TORCH_DIR=<site-packages>/torch.")
  endif()
  set(BITLENS_TORCH_DIR ${_torch_dir} CACHE PATH "The torch package folder (site-packages/torch)")
endif()

set(_tlib ${BITLENS_TORCH_DIR}/lib)
foreach(_lib torch_cpu c10)
  if(NOT EXISTS ${_tlib}/lib${_lib}.so)
    message(FATAL_ERROR "BitLens: ${_tlib}/lib${_lib}.so not found")
  endif()
endforeach()

file(GLOB _torch_dist ${BITLENS_TORCH_DIR}/../torch-*.dist-info)
set(BITLENS_TORCH_VERSION "unknown")
if(_torch_dist)
  list(GET _torch_dist 0 _dist)
  get_filename_component(_dist ${_dist} NAME)
  string(REGEX REPLACE "^torch-(.*)\\.dist-info$" "\\1" BITLENS_TORCH_VERSION "${_dist}")
endif()
message(STATUS "BitLens: LibTorch ${BITLENS_TORCH_VERSION} from ${BITLENS_TORCH_DIR}; pinned ${BITLENS_TORCH_PIN}")

add_library(bitlens_torch INTERFACE)
add_library(bitlens::torch ALIAS bitlens_torch)
target_include_directories(bitlens_torch SYSTEM INTERFACE
  ${BITLENS_TORCH_DIR}/include
  ${BITLENS_TORCH_DIR}/include/torch/csrc/api/include)
set(_torch_libs ${_tlib}/libtorch_cpu.so ${_tlib}/libc10.so)
if(BITLENS_TORCH_CUDA)
  foreach(_lib torch_cuda c10_cuda)
    if(NOT EXISTS ${_tlib}/lib${_lib}.so)
      message(FATAL_ERROR "BitLens: BITLENS_TORCH_CUDA=ON but ${_tlib}/lib${_lib}.so is missing")
    endif()
  endforeach()
  list(APPEND _torch_libs ${_tlib}/libtorch_cuda.so ${_tlib}/libc10_cuda.so)
  target_compile_definitions(bitlens_torch INTERFACE BITLENS_TORCH_CUDA=1)
endif()
target_compile_definitions(bitlens_torch INTERFACE BITLENS_TORCH_VERSION="${BITLENS_TORCH_VERSION}")
# LibTorch's own OpenMP runtime (the wheel ships libgomp.so.1 beside libtorch_cpu), for the
# kernels compiled with -fopenmp (core/CMakeLists.txt): linking it, not the system's, keeps one
# runtime in the process.
set(BITLENS_TORCH_GOMP "")
if(EXISTS ${_tlib}/libgomp.so.1)
  set(BITLENS_TORCH_GOMP ${_tlib}/libgomp.so.1)
  list(APPEND _torch_libs ${BITLENS_TORCH_GOMP})
endif()
target_link_libraries(bitlens_torch INTERFACE
  "-Wl,--no-as-needed" ${_torch_libs} "-Wl,--as-needed" pthread dl)
# No -Wl,-rpath of our own: CMake puts ${_tlib} in the build tree's RPATH (the libraries are
# linked by full path) and replaces it on install (cmake/BitLensInstall.cmake); a flag here
# would stay in the installed binaries, ahead of $ORIGIN/../lib/bitlens.
