/* Shared declarations of the stand-in libcupti (cupti.c) and libcuda (cuda.c)
 * used by the probe's CPU harness (crates/probe/tests/stand_in.rs). The layouts
 * mirror the CUDA 13 / CUPTI headers for exactly the fields the probe reads;
 * the static asserts repeat the offsets the probe's own unit tests assert. */
#ifndef STAND_IN_H
#define STAND_IN_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUmemoryPool;
typedef void *CUlibrary;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_OUT_OF_MEMORY 2

/* CUpti_CallbackData (cupti_callbacks.h). */
typedef struct {
    uint32_t callbackSite; /* 0 = API enter, 1 = API exit */
    const char *functionName;
    const void *functionParams;
    void *functionReturnValue;
    const char *symbolName;
    CUcontext context;
    uint32_t contextUid;
    uint64_t *correlationData;
    uint32_t correlationId;
} CallbackData;

/* CUpti_ResourceData and CUpti_ModuleResourceData. */
typedef struct {
    CUcontext context;
    uint64_t resourceHandle;
    void *resourceDescriptor;
} ResourceData;

typedef struct {
    uint32_t moduleId;
    size_t cubinSize;
    const char *pCubin;
} ModuleResourceData;

/* CUpti_ActivityKernel10 (cupti_activity.h, CUDA 13.0). */
typedef struct {
    uint32_t kind;
    uint8_t cacheConfig;
    uint8_t sharedMemoryConfig;
    uint16_t registersPerThread;
    int32_t partitionedGlobalCacheRequested;
    int32_t partitionedGlobalCacheExecuted;
    uint64_t start;
    uint64_t end;
    uint64_t completed;
    uint32_t deviceId;
    uint32_t contextId;
    uint32_t streamId;
    int32_t gridX, gridY, gridZ;
    int32_t blockX, blockY, blockZ;
    int32_t staticSharedMemory;
    int32_t dynamicSharedMemory;
    uint32_t localMemoryPerThread;
    uint32_t localMemoryTotal;
    uint32_t correlationId;
    int64_t gridId;
    const char *name;
    void *reserved0;
    uint64_t queued;
    uint64_t submitted;
    uint8_t launchType;
    uint8_t isSharedMemoryCarveoutRequested;
    uint8_t sharedMemoryCarveoutRequested;
    uint8_t padding;
    uint32_t sharedMemoryExecuted;
    uint64_t graphNodeId;
    int32_t shmemLimitConfig;
    uint32_t graphId;
    void *pAccessPolicyWindow;
    uint32_t channelID;
    int32_t channelType;
    uint32_t clusterX, clusterY, clusterZ;
    uint32_t clusterSchedulingPolicy;
    uint64_t localMemoryTotal_v2;
    uint32_t maxPotentialClusterSize;
    uint32_t maxActiveClusters;
    uint8_t isDeviceLaunched;
    uint8_t padding3[7];
} KernelRecord;

_Static_assert(offsetof(KernelRecord, start) == 16, "CUpti_ActivityKernel10.start");
_Static_assert(offsetof(KernelRecord, localMemoryTotal) == 88, "CUpti_ActivityKernel10.localMemoryTotal");
_Static_assert(offsetof(KernelRecord, name) == 104, "CUpti_ActivityKernel10.name");
_Static_assert(offsetof(KernelRecord, localMemoryTotal_v2) == 192, "CUpti_ActivityKernel10.localMemoryTotal_v2");
_Static_assert(sizeof(KernelRecord) == 216, "sizeof CUpti_ActivityKernel10");

/* Exported by the stand-in libcupti for the stand-in libcuda. */
void standin_cupti_api(uint32_t cbid, uint32_t site, const char *name, const void *params,
                       CUresult *result, CUcontext ctx, uint32_t correlation, uint64_t *correlation_data);
void standin_cupti_resource(uint32_t cbid, CUcontext ctx, void *descriptor);
int standin_cupti_kernel_enabled(void);
int standin_cupti_enabled(uint32_t domain, uint32_t cbid);
void standin_cupti_kernel_record(const KernelRecord *record);
uint64_t standin_cupti_now(void);
void standin_cupti_set_dropped(size_t dropped);
int standin_cupti_finalized(void);
int standin_cupti_subscribed(void);
int standin_detaches(void);
int standin_attached(void);
int standin_alloc_traced(void);

#endif
