// Whether the AVX2/FMA kernels are compiled in. Without them every op takes
// its scalar reference, which computes the same bits for the matmul (see
// reduction_order.h) and the same values within the stated bounds elsewhere.
#pragma once

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define EXACTLY_KERNELS_AVX2 1
#include <immintrin.h>
#else
#define EXACTLY_KERNELS_AVX2 0
#endif
