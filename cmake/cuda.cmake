# CUDA backend: the runtime API (CUDA::cudart) and cuBLAS, never libcuda directly, so the library
# loads on a machine without a driver and reports NNPOPS_ERROR_NO_DEVICE there.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  set(CMAKE_CUDA_ARCHITECTURES 90)
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)

# Kernels and the host code of the GPU path: the lists of the top-level CMakeLists.txt.
set(NNPOPS_CUDA_KERNEL_SOURCES ${NNPOPS_CUDA_KERNEL_FILES} ${NNPOPS_CUDA_HOST_SOURCES})
list(APPEND NNPOPS_CUDA_SOURCES ${NNPOPS_CUDA_KERNEL_SOURCES})

function(nnpops_configure_cuda target)
  target_compile_definitions(${target} PRIVATE NNPOPS_HAVE_CUDA=1)
  target_link_libraries(${target} PRIVATE CUDA::cudart CUDA::cublas)
endfunction()
