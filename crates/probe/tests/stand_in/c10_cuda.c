/* Stands in for PyTorch's libc10_cuda.so under
 * PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync: its tensor allocations are
 * stream-ordered allocations from the device's pool, which the analysis must
 * count as PyTorch's pool (the library name is what classifies it). */
#include "stand_in.h"

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream);
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream);

/* `pairs` allocate/free pairs of 64 KiB, then `keep` allocations of 1 MiB
 * left live; returns the number of calls that failed. */
int c10_tensors(int pairs, int keep) {
    int failed = 0;
    for (int i = 0; i < pairs; i++) {
        CUdeviceptr p;
        if (cuMemAllocAsync(&p, 65536, 0) != CUDA_SUCCESS || cuMemFreeAsync(p, 0) != CUDA_SUCCESS)
            failed++;
    }
    for (int i = 0; i < keep; i++) {
        CUdeviceptr p;
        failed += cuMemAllocAsync(&p, 1 << 20, 0) != CUDA_SUCCESS;
    }
    return failed;
}
