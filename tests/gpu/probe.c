/* probe.c: the smallest C caller of the CUDA backend. Built by `make cuda-build` with gcc
 * against build/cuda/libs2hc_cuda.a, so a C program linking the archive is checked on
 * every machine: it prints the GPU it found, or why there is none, and exits 0 either way
 * (1 only if the answer is inconsistent). */
#include <stdio.h>
#include <string.h>
#include "kernels/cuda/model_cuda.h"

int main(void) {
    char name[256] = "";
    int n = cuda_available(name, sizeof name);
    if (n > 0) {
        printf("cuda probe: %d GPU(s): %s\n", n, name);
        return 0;
    }
    /* cuda_available's reason reads "no GPU (why)" */
    printf("cuda probe: %s\n", name[0] ? name : "no GPU");
    char err[256] = "";
    /* with no GPU, creation must fail cleanly before it looks at the model */
    cuda_model *cm = cuda_model_create(NULL, 1, 0, err, sizeof err);
    if (cm || !err[0]) {
        printf("cuda probe: cuda_model_create did not refuse cleanly\n");
        return 1;
    }
    printf("cuda probe: cuda_model_create refuses: %s\n", err);
    return 0;
}
