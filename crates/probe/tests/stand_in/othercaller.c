/* A second calling library (like NCCL): its allocations must be attributed to
 * it, not to the program, by the probe's caller lookup. */
#include "stand_in.h"

CUresult cuMemCreate(uint64_t *handle, size_t size, const void *prop, unsigned long long flags);
CUresult cuMemRelease(uint64_t handle);

/* Creates one VMM allocation of `bytes`; returns its handle (0 on failure). */
uint64_t other_library_create(size_t bytes) {
    uint64_t handle = 0;
    if (cuMemCreate(&handle, bytes, 0, 0) != CUDA_SUCCESS)
        return 0;
    return handle;
}

int other_library_release(uint64_t handle) { return cuMemRelease(handle); }
