#define INGOT_QUANT_LEVEL 2
#define INGOT_QUANT_NS avx512
#include "quant/kernels_impl.h"
