# Warnings, SIMD level and sanitizers for every target in the project.
include(CheckCXXCompilerFlag)
include(CheckCXXSourceRuns)

add_library(exactly_flags INTERFACE)
# C++ only: CUDA sources go through nvcc, which takes host flags differently.
target_compile_options(exactly_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion>)
# Position-independent code may not assume that a function it calls is the
# one in the same library (ELF interposition), which blocks inlining; nothing
# here is interposed, so calls stay direct, as in an executable.
target_compile_options(exactly_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-fno-semantic-interposition>)
if(EXACTLY_WERROR)
  target_compile_options(exactly_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()

# x86-64-v3 (AVX2, FMA, F16C, BMI2) when both the compiler and this machine
# support it; otherwise a portable build whose kernels take the scalar path.
set(EXACTLY_SIMD_LEVEL "portable")
if(EXACTLY_NATIVE_SIMD)
  check_cxx_compiler_flag("-march=x86-64-v3" EXACTLY_HAS_V3_FLAG)
  if(EXACTLY_HAS_V3_FLAG)
    set(CMAKE_REQUIRED_FLAGS "-march=x86-64-v3")
    check_cxx_source_runs([=[
      #include <immintrin.h>
      int main() {
        __m256 a = _mm256_set1_ps(1.0f);
        __m256 b = _mm256_fmadd_ps(a, a, a);
        float out[8]; _mm256_storeu_ps(out, b);
        return out[0] == 2.0f && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 0 : 1;
      }]=] EXACTLY_CPU_RUNS_V3)
    unset(CMAKE_REQUIRED_FLAGS)
    if(EXACTLY_CPU_RUNS_V3)
      set(EXACTLY_SIMD_LEVEL "x86-64-v3")
      target_compile_options(exactly_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-march=x86-64-v3>)
    endif()
  endif()
endif()
message(STATUS "exactly: SIMD level ${EXACTLY_SIMD_LEVEL}")

if(EXACTLY_SANITIZE)
  target_compile_options(exactly_flags INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer)
  target_link_options(exactly_flags INTERFACE -fsanitize=address,undefined)
endif()

# Release: -O3. Keep asserts-free NDEBUG off our CHECKs (they are always on).
set(CMAKE_CXX_FLAGS_RELEASE "-O3 -DNDEBUG")
