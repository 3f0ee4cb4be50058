# CUDA backend: the runtime API only (CUDA::cudart), never libcuda, so the library loads on a
# machine without a driver and reports NNPOPS_ERROR_NO_DEVICE there.
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  set(CMAKE_CUDA_ARCHITECTURES 90)
endif()
set(CMAKE_CUDA_STANDARD 17)
list(APPEND NNPOPS_CUDA_SOURCES ${NNPOPS_CUDA_KERNEL_SOURCES})

function(nnpops_configure_cuda target)
  target_compile_definitions(${target} PRIVATE NNPOPS_HAVE_CUDA=1)
  target_link_libraries(${target} PRIVATE CUDA::cudart)
endfunction()
