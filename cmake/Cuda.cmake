# CUDA: enabled when nvcc is found (and EXACTLY_CUDA is on). Machine code for
# Hopper with its own instructions (sm_90a: wgmma, setmaxnreg) and for Ampere
# (sm_80), whose code also runs on later GPUs; nothing else, to keep builds short.
set(EXACTLY_HAVE_CUDA OFF)
if(EXACTLY_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES OFF)  # the -gencode flags below say it all
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(CMAKE_CUDA_STANDARD 17)  # the newest dialect CMake 3.25 knows for nvcc
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_FLAGS_RELEASE "-O3 -DNDEBUG")
    set(EXACTLY_HAVE_CUDA ON)
    set(EXACTLY_CUDA_GENCODE
      "SHELL:-gencode arch=compute_90a,code=sm_90a"
      "SHELL:-gencode arch=compute_80,code=sm_80")
  else()
    message(STATUS "exactly: nvcc not found, building without CUDA")
  endif()
endif()
message(STATUS "exactly: CUDA ${EXACTLY_HAVE_CUDA}")
