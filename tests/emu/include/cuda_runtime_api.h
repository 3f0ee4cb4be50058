/* cuda_runtime_api.h - the emulated tests' stand-in (see cuda_runtime.h). */
#include "cuda_runtime.h"
