# Optional dependencies: DLTUNE_WITH_<X> = AUTO | ON | OFF.
#   AUTO: use it when found, build without it otherwise;
#   ON:   fail the configure step when it is missing;
#   OFF:  never use it.
# Each result becomes DLTUNE_HAVE_<X> (0/1) in dltune/config.h. Required dependencies
# (hwloc, SQLite, yaml-cpp, CLI11, nlohmann-json, OpenBLAS, libsodium) are found here too.

find_package(PkgConfig REQUIRED)

function(dltune_tristate name doc)
  set(DLTUNE_WITH_${name} AUTO CACHE STRING "${doc} (AUTO|ON|OFF)")
  set_property(CACHE DLTUNE_WITH_${name} PROPERTY STRINGS AUTO ON OFF)
  if(NOT DLTUNE_WITH_${name} MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "DLTUNE_WITH_${name} must be AUTO, ON or OFF, got '${DLTUNE_WITH_${name}}'")
  endif()
endfunction()

# Sets DLTUNE_HAVE_<name> in the parent scope from <found> and reports the decision.
function(dltune_resolve name found)
  if(DLTUNE_WITH_${name} STREQUAL "OFF")
    set(have 0)
  elseif(${found})
    set(have 1)
  elseif(DLTUNE_WITH_${name} STREQUAL "ON")
    message(FATAL_ERROR "DLTUNE_WITH_${name}=ON but ${name} was not found")
  else()
    set(have 0)
  endif()
  set(DLTUNE_HAVE_${name} ${have} PARENT_SCOPE)
  message(STATUS "dltune: ${name} = ${have} (requested ${DLTUNE_WITH_${name}})")
endfunction()

# --- required -----------------------------------------------------------------
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc>=2.0)
find_package(SQLite3 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json 3.9 REQUIRED)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
# Ed25519 bundle signatures (tuner/db/signing.h): signing is core to the database.
pkg_check_modules(SODIUM REQUIRED IMPORTED_TARGET libsodium>=1.0.16)
find_package(Threads REQUIRED)

# --- optional -----------------------------------------------------------------
dltune_tristate(PMIX "PMIx bootstrap and the embedded PMIx server")
dltune_tristate(MPI "Open MPI communicator and native MPI collectives")
dltune_tristate(SLURM "Slurm launch backend and the SPANK plugin")
dltune_tristate(CUDA "GPU engine on CUDA (cuBLAS, cuDNN)")
dltune_tristate(NCCL "NCCL communicator and NCCL tuner plugin")
dltune_tristate(JPEG "JPEG decoding of imagefolder data (libjpeg-turbo's TurboJPEG)")
dltune_tristate(PNG "PNG decoding of imagefolder data (libpng)")
dltune_tristate(DNNL "oneDNN (libdnnl-dev) as a kernel provider of the CPU engine")

set(_found FALSE)
if(NOT DLTUNE_WITH_PMIX STREQUAL "OFF")
  pkg_check_modules(PMIX IMPORTED_TARGET pmix>=4)
  set(_found ${PMIX_FOUND})
endif()
dltune_resolve(PMIX _found)

set(_found FALSE)
if(NOT DLTUNE_WITH_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS C)
  set(_found ${MPI_C_FOUND})
endif()
dltune_resolve(MPI _found)

set(_found FALSE)
if(NOT DLTUNE_WITH_SLURM STREQUAL "OFF")
  # Slurm ships no pkg-config file; the SPANK plugin needs only the headers.
  find_path(SLURM_INCLUDE_DIR slurm/spank.h)
  find_program(SRUN_EXECUTABLE srun)
  if(SLURM_INCLUDE_DIR)
    set(_found TRUE)
  endif()
endif()
dltune_resolve(SLURM _found)

set(_found FALSE)
if(NOT DLTUNE_WITH_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    find_library(CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
    find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    if(CUDNN_LIBRARY AND CUDNN_INCLUDE_DIR)
      set(_found TRUE)
    endif()
  endif()
endif()
dltune_resolve(CUDA _found)
include(${CMAKE_CURRENT_LIST_DIR}/DltuneCuda.cmake)

set(_found FALSE)
if(NOT DLTUNE_WITH_NCCL STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR}
                 ${CUDAToolkit_LIBRARY_ROOT}/lib)
    if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
      set(_found TRUE)
    endif()
  endif()
endif()
dltune_resolve(NCCL _found)

set(_found FALSE)
if(NOT DLTUNE_WITH_JPEG STREQUAL "OFF")
  pkg_check_modules(TURBOJPEG IMPORTED_TARGET libturbojpeg)
  set(_found ${TURBOJPEG_FOUND})
endif()
dltune_resolve(JPEG _found)

set(_found FALSE)
if(NOT DLTUNE_WITH_PNG STREQUAL "OFF")
  pkg_check_modules(LIBPNG IMPORTED_TARGET libpng)
  set(_found ${LIBPNG_FOUND})
endif()
dltune_resolve(PNG _found)

set(_found FALSE)
if(NOT DLTUNE_WITH_DNNL STREQUAL "OFF")
  # Debian's libdnnl-dev 2.6 ships a CMake package (target DNNL::dnnl) whose config requires
  # OpenCL (its GPU runtime): look for that first so that a machine without it builds without
  # oneDNN instead of failing. Its CPU runtime is GNU OpenMP (libgomp), which the engine calls.
  find_package(OpenCL QUIET)
  if(OpenCL_FOUND)
    find_package(dnnl CONFIG QUIET)
  else()
    find_path(DLTUNE_DNNL_HEADER dnnl.hpp)
    if(DLTUNE_DNNL_HEADER)
      message(STATUS "dltune: libdnnl-dev is installed but its CMake package needs OpenCL's "
                     "(Debian: ocl-icd-opencl-dev); building without oneDNN's kernels")
    endif()
  endif()
  if(dnnl_FOUND AND TARGET DNNL::dnnl)
    set(_found TRUE)
  endif()
endif()
dltune_resolve(DNNL _found)

# The git revision baked into `dltune version`.
execute_process(COMMAND git rev-parse --short=12 HEAD
                WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
                OUTPUT_VARIABLE DLTUNE_GIT_REVISION OUTPUT_STRIP_TRAILING_WHITESPACE
                ERROR_QUIET)
if(NOT DLTUNE_GIT_REVISION)
  set(DLTUNE_GIT_REVISION "unknown")
endif()
