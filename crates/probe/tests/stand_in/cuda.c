/* Stand-in libcuda.so.1: loads the injection library named by
 * CUDA_INJECTION64_PATH in cuInit (as the real driver does), keeps a toy model
 * of one 80 GiB device (plain allocations, stream-ordered pools that grow in
 * 32 MiB chunks and never shrink, VMM handles), and fires the CUPTI callbacks
 * of every call through the stand-in libcupti, around the work, with the
 * parameter structs of the real CUDA headers. */
#define _GNU_SOURCE
#include "stand_in.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GiB (1024ull * 1024 * 1024)
#define MiB (1024ull * 1024)
#define DEVICE_TOTAL (80 * GiB)
#define CONTEXT_BYTES (512 * MiB)
#define POOL_CHUNK (32 * MiB)

/* A context: device ordinal and id first (read by the stand-in libcupti). */
typedef struct {
    uint32_t device;
    uint32_t id;
} Context;

typedef struct {
    uint64_t reserved, reserved_high, used, used_high;
} Pool;

typedef struct {
    uint64_t address;
    uint64_t bytes;
    Pool *pool;
} Allocation;

static Context g_context = {0, 1};
static int g_context_created;
static CUcontext g_current;
static CUcontext g_pushed[16];
static int g_pushed_len;
static uint64_t g_device_used;
static uint64_t g_next_address = 0x7f0000000000ull;
static uint32_t g_correlation;
static Pool g_default_pool;
static Pool g_pools[8];
static int g_pools_len;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static Allocation *g_live;
static size_t g_live_len, g_live_cap;
static int g_initialised;
/* Reads of the device pool's reserved size (one per probe poll). */
static uint64_t g_default_pool_reads;

static uint32_t next_correlation(void) { return __atomic_add_fetch(&g_correlation, 1, __ATOMIC_SEQ_CST); }

/* Fires the enter callback, runs `body` (which sets `result`), fires the exit
 * callback and returns the result: the shape of every traced driver call. */
#define TRACED(cbid, name, params, body)                                                 \
    do {                                                                                 \
        uint32_t corr_ = next_correlation();                                             \
        uint64_t corr_data_ = 0;                                                         \
        CUresult result = CUDA_SUCCESS;                                                  \
        standin_cupti_api(cbid, 0, name, &(params), &result, g_current, corr_, &corr_data_); \
        body;                                                                            \
        standin_cupti_api(cbid, 1, name, &(params), &result, g_current, corr_, &corr_data_); \
        return result;                                                                   \
    } while (0)

CUresult cuInit(unsigned int flags) {
    (void)flags;
    if (__atomic_exchange_n(&g_initialised, 1, __ATOMIC_SEQ_CST))
        return CUDA_SUCCESS;
    const char *injection = getenv("CUDA_INJECTION64_PATH");
    if (injection != NULL && *injection != '\0') {
        void *lib = dlopen(injection, RTLD_NOW | RTLD_LOCAL);
        if (lib != NULL) {
            int (*init)(void) = (int (*)(void))dlsym(lib, "InitializeInjection");
            if (init != NULL)
                init();
        }
    }
    return CUDA_SUCCESS;
}

/* --- bookkeeping ------------------------------------------------------- */

static int reserve_device(uint64_t bytes) {
    if (g_device_used + bytes > DEVICE_TOTAL)
        return 0;
    g_device_used += bytes;
    return 1;
}

static uint64_t new_address(uint64_t bytes) {
    uint64_t a = g_next_address;
    g_next_address += (bytes + 1023) / 512 * 512;
    return a;
}

static void remember(uint64_t address, uint64_t bytes, Pool *pool) {
    if (g_live_len == g_live_cap) {
        g_live_cap = g_live_cap ? g_live_cap * 2 : 1024;
        g_live = realloc(g_live, g_live_cap * sizeof(Allocation));
    }
    g_live[g_live_len++] = (Allocation){address, bytes, pool};
}

static int forget(uint64_t address, Allocation *out) {
    for (size_t i = g_live_len; i-- > 0;) {
        if (g_live[i].address == address) {
            *out = g_live[i];
            g_live[i] = g_live[--g_live_len];
            return 1;
        }
    }
    return 0;
}

static CUresult device_alloc(CUdeviceptr *dptr, size_t bytes) {
    pthread_mutex_lock(&g_lock);
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    if (reserve_device(bytes)) {
        *dptr = new_address(bytes);
        remember(*dptr, bytes, NULL);
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

static CUresult device_free(CUdeviceptr dptr) {
    pthread_mutex_lock(&g_lock);
    Allocation a;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (forget(dptr, &a)) {
        if (a.pool != NULL)
            a.pool->used -= a.bytes;
        else
            g_device_used -= a.bytes;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

static CUresult pool_alloc(Pool *pool, CUdeviceptr *dptr, size_t bytes) {
    pthread_mutex_lock(&g_lock);
    CUresult r = CUDA_SUCCESS;
    if (pool->used + bytes > pool->reserved) {
        uint64_t grow = (pool->used + bytes - pool->reserved + POOL_CHUNK - 1) / POOL_CHUNK * POOL_CHUNK;
        if (reserve_device(grow)) {
            pool->reserved += grow;
            if (pool->reserved > pool->reserved_high)
                pool->reserved_high = pool->reserved;
        } else {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    if (r == CUDA_SUCCESS) {
        pool->used += bytes;
        if (pool->used > pool->used_high)
            pool->used_high = pool->used;
        *dptr = new_address(bytes);
        remember(*dptr, bytes, pool);
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

/* --- contexts and queries (untraced, as in the probe's subscription) --- */

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, int device) {
    struct {
        CUcontext *pctx;
        int dev;
    } params = {pctx, device};
    TRACED(386, "cuDevicePrimaryCtxRetain", params, {
        pthread_mutex_lock(&g_lock);
        int created = !g_context_created;
        if (created) {
            g_context_created = 1;
            reserve_device(CONTEXT_BYTES);
        }
        pthread_mutex_unlock(&g_lock);
        *pctx = &g_context;
        g_current = &g_context;
        if (created)
            standin_cupti_resource(1, &g_context, NULL);
    });
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
    /* STANDIN_CTX_PUSH_DELAY_MS: a slow push (the attach thread's reading
     * after it subscribed again), so the program exits meanwhile. */
    const char *delay = getenv("STANDIN_CTX_PUSH_DELAY_MS");
    if (delay)
        usleep((useconds_t)atoi(delay) * 1000);
    if (g_pushed_len == 16)
        return CUDA_ERROR_INVALID_VALUE;
    g_pushed[g_pushed_len++] = g_current;
    g_current = ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent_v2(CUcontext *ctx) {
    if (g_pushed_len == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (ctx != NULL)
        *ctx = g_current;
    g_current = g_pushed[--g_pushed_len];
    return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    /* STANDIN_SLOW_READING="N:MS": the N-th reading (from 1) takes MS ms,
     * so one callback is far slower than the rest. */
    static int readings;
    const char *slow = getenv("STANDIN_SLOW_READING");
    int nth = 0, ms = 0;
    if (slow && sscanf(slow, "%d:%d", &nth, &ms) == 2
        && __atomic_add_fetch(&readings, 1, __ATOMIC_RELAXED) == nth)
        usleep((useconds_t)ms * 1000);
    uint64_t used = __atomic_load_n(&g_device_used, __ATOMIC_RELAXED);
    *free_bytes = DEVICE_TOTAL - used;
    *total = DEVICE_TOTAL;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *bus_id, int len, int device) {
    snprintf(bus_id, (size_t)len, "00000000:%02X:00.0", 0x19 + device);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, int device) {
    if (device != 0)
        return CUDA_ERROR_INVALID_VALUE;
    *pool = &g_default_pool;
    return CUDA_SUCCESS;
}

/* CUmemPoolProps: allocType, handleTypes, location {type, id}, ... */
typedef struct {
    int alloc_type, handle_types, location_type, location_id;
    void *win32;
    size_t max_size;
    unsigned short usage;
    unsigned char reserved[54];
} PoolProps;

CUresult cuMemPoolCreate(CUmemoryPool *pool, const PoolProps *props) {
    struct {
        CUmemoryPool *pool;
        const PoolProps *props;
    } params = {pool, props};
    TRACED(607, "cuMemPoolCreate", params, {
        pthread_mutex_lock(&g_lock);
        result = CUDA_ERROR_OUT_OF_MEMORY;
        if (g_pools_len < 8) {
            *pool = &g_pools[g_pools_len++];
            result = CUDA_SUCCESS;
        }
        pthread_mutex_unlock(&g_lock);
    });
}

/* Gives the pool's memory back to the device; its handle must not be used again. */
CUresult cuMemPoolDestroy(CUmemoryPool pool) {
    struct {
        CUmemoryPool pool;
    } params = {pool};
    TRACED(608, "cuMemPoolDestroy", params, {
        Pool *p = pool;
        pthread_mutex_lock(&g_lock);
        g_device_used -= p->reserved;
        memset(p, 0xdd, sizeof *p); /* poison: a read after this is a bug */
        pthread_mutex_unlock(&g_lock);
    });
}

/* Whether the probe currently receives this driver API call's callbacks. */
int standin_traced(uint32_t cbid) { return standin_cupti_enabled(1, cbid); }

uint64_t standin_default_pool_reads(void) { return __atomic_load_n(&g_default_pool_reads, __ATOMIC_SEQ_CST); }

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, int attribute, void *value) {
    Pool *p = pool;
    uint64_t v;
    pthread_mutex_lock(&g_lock);
    if (p->reserved == 0xddddddddddddddddull) {
        pthread_mutex_unlock(&g_lock);
        fprintf(stderr, "stand-in libcuda: cuMemPoolGetAttribute on a destroyed pool\n");
        abort();
    }
    if (p == &g_default_pool && attribute == 5)
        __atomic_add_fetch(&g_default_pool_reads, 1, __ATOMIC_SEQ_CST);
    switch (attribute) {
    case 5: v = p->reserved; break;
    case 6: v = p->reserved_high; break;
    case 7: v = p->used; break;
    case 8: v = p->used_high; break;
    default: pthread_mutex_unlock(&g_lock); return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&g_lock);
    *(uint64_t *)value = v;
    return CUDA_SUCCESS;
}

/* --- traced allocation calls ------------------------------------------- */

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    struct {
        CUdeviceptr *dptr;
        size_t bytesize;
    } params = {dptr, bytesize};
    TRACED(243, "cuMemAlloc_v2", params, result = device_alloc(dptr, bytesize));
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
    struct {
        CUdeviceptr dptr;
    } params = {dptr};
    TRACED(245, "cuMemFree_v2", params, result = device_free(dptr));
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
    struct {
        CUdeviceptr *dptr;
        size_t bytesize;
        CUstream hStream;
    } params = {dptr, bytesize, stream};
    TRACED(598, "cuMemAllocAsync", params, result = pool_alloc(&g_default_pool, dptr, bytesize));
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
    struct {
        CUdeviceptr *dptr;
        size_t bytesize;
        CUstream hStream;
    } params = {dptr, bytesize, stream};
    TRACED(599, "cuMemAllocAsync_ptsz", params, result = pool_alloc(&g_default_pool, dptr, bytesize));
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream) {
    struct {
        CUdeviceptr *dptr;
        size_t bytesize;
        CUmemoryPool pool;
        CUstream hStream;
    } params = {dptr, bytesize, pool, stream};
    TRACED(611, "cuMemAllocFromPoolAsync", params, result = pool_alloc((Pool *)pool, dptr, bytesize));
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
    struct {
        CUdeviceptr dptr;
        CUstream hStream;
    } params = {dptr, stream};
    TRACED(600, "cuMemFreeAsync", params, result = device_free(dptr));
}

CUresult cuMemCreate(uint64_t *handle, size_t size, const void *prop, unsigned long long flags) {
    struct {
        uint64_t *handle;
        size_t size;
        const void *prop;
        unsigned long long flags;
    } params = {handle, size, prop, flags};
    TRACED(549, "cuMemCreate", params, result = device_alloc(handle, size));
}

CUresult cuMemRelease(uint64_t handle) {
    struct {
        uint64_t handle;
    } params = {handle};
    TRACED(550, "cuMemRelease", params, result = device_free(handle));
}

CUresult cuLibraryLoadData(CUlibrary *library, const void *code, void *jit_options, void *jit_values,
                           unsigned int jit_count, void *library_options, void *library_values,
                           unsigned int library_count) {
    struct {
        CUlibrary *library;
        const void *code;
        void *a, *b;
        unsigned int c;
        void *d, *e;
        unsigned int f;
    } params = {library, code, jit_options, jit_values, jit_count, library_options, library_values, library_count};
    TRACED(678, "cuLibraryLoadData", params, {
        pthread_mutex_lock(&g_lock);
        *library = (CUlibrary)(uintptr_t)new_address(4096);
        pthread_mutex_unlock(&g_lock);
    });
}

CUresult cuLibraryUnload(CUlibrary library) {
    struct {
        CUlibrary library;
    } params = {library};
    TRACED(680, "cuLibraryUnload", params, (void)library);
}

/* --- kernel launches: cuLaunchKernel's callbacks around the launch, and a
 * kernel activity record when records are on at the launch (as CUPTI
 * decides at the launch). The function handle is the name's address. */

static void kernel_record(const char *name, uint64_t local_total, uint32_t local_per_thread,
                          uint16_t registers, int failed) {
    if (!standin_cupti_kernel_enabled())
        return;
    KernelRecord k;
    memset(&k, 0, sizeof k);
    k.kind = 10;
    k.registersPerThread = registers;
    if (!failed) {
        k.start = standin_cupti_now();
        k.end = k.start + 1000;
        k.completed = k.end;
    }
    k.deviceId = g_context.device;
    k.contextId = g_context.id;
    k.streamId = 7;
    k.gridX = 4, k.gridY = 1, k.gridZ = 1;
    k.blockX = 128, k.blockY = 1, k.blockZ = 1;
    k.localMemoryPerThread = local_per_thread;
    k.localMemoryTotal = local_total > 0xffffffffull ? 0xffffffffu : (uint32_t)local_total;
    k.localMemoryTotal_v2 = local_total;
    k.correlationId = next_correlation();
    k.name = name;
    standin_cupti_kernel_record(&k);
}

void standin_launch_kernel(const char *name, uint64_t local_total, uint32_t local_per_thread,
                           uint16_t registers, int failed) {
    /* cuLaunchKernel_params: (f, grid x/y/z, block x/y/z, shared bytes, stream, params, extra). */
    struct {
        void *f;
        unsigned grid[3], block[3], shared;
        CUstream stream;
        void **params, **extra;
    } params = {(void *)name, {4, 1, 1}, {128, 1, 1}, 0, NULL, NULL, NULL};
    uint32_t corr = next_correlation();
    uint64_t corr_data = 0;
    CUresult result = failed ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
    standin_cupti_api(307, 0, "cuLaunchKernel", &params, &result, g_current, corr, &corr_data);
    kernel_record(name, local_total, local_per_thread, registers, failed);
    standin_cupti_api(307, 1, "cuLaunchKernel", &params, &result, g_current, corr, &corr_data);
}

/* cuLaunchKernelEx_params: (config, f, params, extra): the function second. */
void standin_launch_kernel_ex(const char *name) {
    struct {
        const void *config;
        void *f;
        void **params, **extra;
    } params = {NULL, (void *)name, NULL, NULL};
    uint32_t corr = next_correlation();
    uint64_t corr_data = 0;
    CUresult result = CUDA_SUCCESS;
    standin_cupti_api(652, 0, "cuLaunchKernelEx", &params, &result, g_current, corr, &corr_data);
    kernel_record(name, 0, 0, 32, 0);
    standin_cupti_api(652, 1, "cuLaunchKernelEx", &params, &result, g_current, corr, &corr_data);
}

/* cuGraphLaunch_params: (graph exec, stream); its kernel nodes each get a
 * record when records are on. */
void standin_launch_graph(void *graph_exec, const char **kernels, int n) {
    struct {
        void *exec;
        CUstream stream;
    } params = {graph_exec, NULL};
    uint32_t corr = next_correlation();
    uint64_t corr_data = 0;
    CUresult result = CUDA_SUCCESS;
    standin_cupti_api(514, 0, "cuGraphLaunch", &params, &result, g_current, corr, &corr_data);
    for (int i = 0; i < n; i++)
        kernel_record(kernels[i], 0, 0, 32, 0);
    standin_cupti_api(514, 1, "cuGraphLaunch", &params, &result, g_current, corr, &corr_data);
}

void standin_set_cupti_dropped(size_t dropped) { standin_cupti_set_dropped(dropped); }

/* For the program, which does not link the stand-in CUPTI: its detach count
 * and whether a subscriber is attached. */
int standin_detaches(void) { return standin_cupti_finalized(); }
int standin_attached(void) { return standin_cupti_subscribed(); }
/* Whether cuMemAlloc_v2's callback is on: an attach is done only then (the
 * subscription comes first, the callbacks after it). */
int standin_alloc_traced(void) { return standin_cupti_enabled(1, 243); }
