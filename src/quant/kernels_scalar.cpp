#define INGOT_QUANT_LEVEL 0
#define INGOT_QUANT_NS scalar
#include "quant/kernels_impl.h"
