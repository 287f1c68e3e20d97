# The CUDA language for the GPU engine (engine/gpu/), included by DltuneOptions.cmake once
# DLTUNE_HAVE_CUDA is resolved. Nothing here runs when CUDA is off or was not found.
#
# Defaults: CMAKE_CUDA_ARCHITECTURES 90 (H200 / H100; override with -DCMAKE_CUDA_ARCHITECTURES=..)
# and the system g++ as nvcc's host compiler. Only the few kernel files are compiled by nvcc;
# the rest of the GPU engine is C++ against the CUDA runtime, cuBLAS and cuDNN APIs.
if(NOT DLTUNE_HAVE_CUDA)
  return()
endif()

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  set(CMAKE_CUDA_ARCHITECTURES 90 CACHE STRING "CUDA architectures (90: H100 / H200)")
endif()
if(NOT CMAKE_CUDA_COMPILER AND CUDAToolkit_NVCC_EXECUTABLE)
  set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
endif()
if(NOT CMAKE_CUDA_HOST_COMPILER)
  find_program(DLTUNE_GXX g++)
  if(DLTUNE_GXX)
    set(CMAKE_CUDA_HOST_COMPILER ${DLTUNE_GXX})
  endif()
endif()
enable_language(CUDA)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
message(STATUS "dltune: CUDA ${CMAKE_CUDA_COMPILER_VERSION}, architectures "
               "${CMAKE_CUDA_ARCHITECTURES}, host compiler ${CMAKE_CUDA_HOST_COMPILER}")
