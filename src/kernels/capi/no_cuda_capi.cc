// Built without CUDA: the C interface says so instead of failing to link.
#include "kernels/capi/kernels_capi.h"

extern "C" int exactly_has_cuda(void) { return 0; }
