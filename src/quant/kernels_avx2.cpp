#define INGOT_QUANT_LEVEL 1
#define INGOT_QUANT_NS avx2
#include "quant/kernels_impl.h"
