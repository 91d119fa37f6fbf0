/* mma.h for the CPU emulator: WMMA 16x16x16 fragments held whole by every lane.
 * No WMMA call is a barrier here: each lane loads the whole tile when it gets there, and
 * lane 0 alone stores its fragment when it gets there. So a lane that reads a tile a
 * store wrote, or writes memory a load reads, sees the other lanes' side only if a
 * __syncwarp (or __syncthreads) orders the two, which is what the GPU's memory model asks
 * for; in some of the emulator's orders (emu.h) a missing one shows. */
#ifndef S2HC_EMU_MMA_H
#define S2HC_EMU_MMA_H
#include "emu.h"
namespace nvcuda {
namespace wmma {
struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };

/* WMMA's contract: a 256-bit aligned pointer, ldm a multiple of 16 bytes. */
inline void emu_wmma_check(const void *p, unsigned ldm, size_t elem) {
    if (((uintptr_t)p & 31) || (ldm * elem) % 16) {
        fprintf(stderr, "emu: WMMA pointer %p / ldm %u breaks the 32-byte / 16-byte rule\n", p, ldm);
        abort();
    }
}

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
    enum { num_elements = 256 };
    float x[256]; /* element (r, c) at x[r * 16 + c] */
};

template <typename Use, int M, int N, int K, typename T, typename L>
inline void fill_fragment(fragment<Use, M, N, K, T, L> &f, float v) {
    for (int i = 0; i < 256; i++) f.x[i] = v;
}
/* A (16 x 16, rows = M index, columns = K index) */
inline void load_matrix_sync(fragment<matrix_a, 16, 16, 16, __nv_bfloat16, row_major> &f, const __nv_bfloat16 *p,
                             unsigned ldm) {
    emu_wmma_check(p, ldm, 2);
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) f.x[r * 16 + c] = __bfloat162float(p[r * ldm + c]);
}
inline void load_matrix_sync(fragment<matrix_a, 16, 16, 16, __nv_bfloat16, col_major> &f, const __nv_bfloat16 *p,
                             unsigned ldm) {
    emu_wmma_check(p, ldm, 2);
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) f.x[r * 16 + c] = __bfloat162float(p[c * ldm + r]);
}
/* B (16 x 16, rows = K index, columns = N index) */
inline void load_matrix_sync(fragment<matrix_b, 16, 16, 16, __nv_bfloat16, row_major> &f, const __nv_bfloat16 *p,
                             unsigned ldm) {
    emu_wmma_check(p, ldm, 2);
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) f.x[r * 16 + c] = __bfloat162float(p[r * ldm + c]);
}
inline void load_matrix_sync(fragment<matrix_b, 16, 16, 16, __nv_bfloat16, col_major> &f, const __nv_bfloat16 *p,
                             unsigned ldm) {
    emu_wmma_check(p, ldm, 2);
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) f.x[r * 16 + c] = __bfloat162float(p[c * ldm + r]);
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p, unsigned ldm, layout_t l) {
    emu_wmma_check(p, ldm, 4);
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) f.x[r * 16 + c] = l == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
}
inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f, unsigned ldm, layout_t l) {
    emu_wmma_check(p, ldm, 4);
    if ((emu_linear_tid() & 31) == 0)
        for (int r = 0; r < 16; r++)
            for (int c = 0; c < 16; c++) (l == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.x[r * 16 + c];
}
template <typename LA, typename LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
                     const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LA> &a,
                     const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LB> &b,
                     const fragment<accumulator, 16, 16, 16, float> &c) {
    float out[256];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            float s = c.x[i * 16 + j];
            for (int k = 0; k < 16; k++) s += a.x[i * 16 + k] * b.x[k * 16 + j];
            out[i * 16 + j] = s;
        }
    memcpy(d.x, out, sizeof out);
}
}  // namespace wmma
}  // namespace nvcuda
#endif
