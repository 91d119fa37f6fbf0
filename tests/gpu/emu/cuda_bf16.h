/* cuda_bf16.h for the CPU emulator: bf16 as the upper half of a float, rounded to nearest even. */
#ifndef S2HC_EMU_BF16_H
#define S2HC_EMU_BF16_H
#include <stdint.h>
#include <string.h>
struct __nv_bfloat16 {
    uint16_t bits;
};
static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    __nv_bfloat16 b;
    if ((u & 0x7fffffffu) > 0x7f800000u) { /* NaN stays NaN */
        b.bits = (uint16_t)((u >> 16) | 0x40);
        return b;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    b.bits = (uint16_t)(u >> 16);
    return b;
}
static inline float __bfloat162float(__nv_bfloat16 b) {
    uint32_t u = (uint32_t)b.bits << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
#endif
