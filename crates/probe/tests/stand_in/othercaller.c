/* A second calling library (like NCCL): its allocations must be attributed to
 * it, not to the program, by the probe's caller lookup. */
#include "stand_in.h"

CUresult cuMemCreate(uint64_t *handle, size_t size, const void *prop, unsigned long long flags);
CUresult cuMemRelease(uint64_t handle);
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream);
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream);
CUresult cuMemPoolCreate(CUmemoryPool *pool, const void *props);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream);

/* Creates one VMM allocation of `bytes`; returns its handle (0 on failure). */
uint64_t other_library_create(size_t bytes) {
    uint64_t handle = 0;
    if (cuMemCreate(&handle, bytes, 0, 0) != CUDA_SUCCESS)
        return 0;
    return handle;
}

int other_library_release(uint64_t handle) { return cuMemRelease(handle); }

/* Allocates and frees `pairs` times from the device's stream-ordered pool
 * (the pool the program uses too); returns the pairs that succeeded. */
int other_library_async(int pairs) {
    int ok = 0;
    for (int i = 0; i < pairs; i++) {
        CUdeviceptr p;
        if (cuMemAllocAsync(&p, 4096, 0) == CUDA_SUCCESS && cuMemFreeAsync(p, 0) == CUDA_SUCCESS)
            ok++;
    }
    return ok;
}

/* Creates its own pool on device 0 and leaves `count` allocations of `bytes`
 * live in it; returns the allocations that succeeded. */
int other_library_own_pool(int count, size_t bytes) {
    /* CUmemPoolProps: pinned device memory on device 0. */
    struct {
        int alloc_type, handle_types, location_type, location_id;
        void *win32;
        size_t max_size;
        unsigned short usage;
        unsigned char reserved[54];
    } props = {1, 0, 1, 0, 0, 0, 0, {0}};
    CUmemoryPool pool;
    if (cuMemPoolCreate(&pool, &props) != CUDA_SUCCESS)
        return 0;
    int ok = 0;
    for (int i = 0; i < count; i++) {
        CUdeviceptr p;
        ok += cuMemAllocFromPoolAsync(&p, bytes, pool, 0) == CUDA_SUCCESS;
    }
    return ok;
}
