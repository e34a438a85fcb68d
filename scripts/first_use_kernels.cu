// Kernels for scripts/gpu_first_use_memory.py (issue 35): each one exercises
// one lazily committed piece of a CUDA context, so that the device's free
// memory can be read around its first launch. Built on the GPU machine with
//   nvcc -fatbin -arch=sm_90 -o first_use_kernels.fatbin first_use_kernels.cu
// and loaded through the driver API (cuModuleLoadData), never the runtime.
#include <cstdio>

extern "C" __global__ void trivial(int *out) {
    if (out != nullptr && threadIdx.x == 0 && blockIdx.x == 0) {
        out[0] = 1;
    }
}

extern "C" __global__ void trivial_again(int *out) {
    if (out != nullptr && threadIdx.x == 0 && blockIdx.x == 0) {
        out[0] = 2;
    }
}

// A per-thread array indexed at run time lives in local memory: its launch
// over many threads grows the context's local-memory reservation.
extern "C" __global__ void local_heavy(int *out, int n) {
    volatile int scratch[256];
    for (int i = 0; i < 256; ++i) {
        scratch[i] = i * n;
    }
    int acc = 0;
    for (int i = 0; i < 256; i += 7) {
        acc += scratch[(i * n) & 255];
    }
    if (out != nullptr && acc == 42) {
        out[0] = acc;
    }
}

extern "C" __global__ void uses_printf(int flag) {
    if (flag == 12345) {
        printf("never printed %d\n", flag);
    }
}

extern "C" __global__ void uses_malloc(int flag) {
    if (flag == 12345) {
        void *p = malloc(16);
        free(p);
    }
}
