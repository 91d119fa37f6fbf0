/* cuda_runtime.h for the CPU emulator (emu.h). */
#include "emu.h"
