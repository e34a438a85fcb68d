/* Stand-in libcupti.so.13: the CUPTI entry points the probe binds (cupti.rs),
 * with just enough behaviour to drive it: one subscriber, per-(domain, cbid)
 * enable flags, kernel activity records in buffers the probe hands out, and a
 * registrable timestamp source. The stand-in libcuda calls standin_cupti_* to
 * fire callbacks the way the real driver does. */
#define _GNU_SOURCE
#include "stand_in.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef void (*CallbackFn)(void *user, uint32_t domain, uint32_t cbid, const void *data);
typedef void (*BufferRequestFn)(uint8_t **buffer, size_t *size, size_t *max_records);
typedef void (*BufferCompleteFn)(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid);
typedef uint64_t (*TimestampFn)(void);

#define CUPTI_SUCCESS 0
#define CUPTI_ERROR_INVALID_PARAMETER 1
#define CUPTI_ERROR_MAX_LIMIT_REACHED 12
#define CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED 39
#define KIND_CONCURRENT_KERNEL 10
#define MAX_CBID 1024

static CallbackFn g_callback;
static void *g_user;
static int g_subscribed;
/* Read on every traced call from any thread, written by the probe (also from
 * its writer thread while calls are in flight): accessed atomically. */
static unsigned char g_enabled[4][MAX_CBID];
/* Callbacks handed to the subscriber, per driver API id (enter and exit each count). */
static uint64_t g_delivered[MAX_CBID];
static BufferRequestFn g_request;
static BufferCompleteFn g_complete;
static TimestampFn g_timestamp;
static volatile int g_kernel_enabled;
static size_t g_dropped;

/* CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER: the client promised zeroed
 * buffers; otherwise the stand-in clears each one, as CUPTI does. */
#define ATTR_ZEROED_OUT_ACTIVITY_BUFFER 5
static uint8_t g_client_zeroes;
static uint64_t g_buffers_requested, g_bytes_cleared, g_buffers_not_zero;

static pthread_mutex_t g_buffer_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *g_buffer;
static size_t g_buffer_size;
static size_t g_buffer_valid;

int cuptiGetVersion(uint32_t *version) {
    *version = 130001;
    return CUPTI_SUCCESS;
}

static int g_finalized;

/* Callbacks running now, and subscriptions made so far. CUPTI attached
 * again while a callback from before its detach still ran crashed the
 * process on an H100 (CUPTI 13, 2026-12-06, call 29: SIGSEGV as that
 * callback returned); the stand-in aborts there the same way, saying so. */
static int g_in_callback;
static int g_subscriptions;

static void deliver(CallbackFn callback, uint32_t domain, uint32_t cbid, const void *data) {
    int before = __atomic_load_n(&g_subscriptions, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&g_in_callback, 1, __ATOMIC_SEQ_CST);
    callback(g_user, domain, cbid, data);
    __atomic_sub_fetch(&g_in_callback, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&g_subscriptions, __ATOMIC_SEQ_CST) != before) {
        fprintf(stderr, "stand-in CUPTI: subscribed again while a callback from before the detach still ran\n");
        abort();
    }
}

int cuptiSubscribe(void **subscriber, CallbackFn callback, void *user) {
    /* STANDIN_ATTACH_DELAY_MS: a subscription after a detach takes that
     * long (a CUPTI slow to attach again). */
    const char *delay = getenv("STANDIN_ATTACH_DELAY_MS");
    if (delay && __atomic_load_n(&g_finalized, __ATOMIC_SEQ_CST))
        usleep(atoi(delay) * 1000);
    if (__atomic_load_n(&g_subscribed, __ATOMIC_SEQ_CST))
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    g_user = user;
    __atomic_store_n(&g_callback, callback, __ATOMIC_SEQ_CST);
    __atomic_store_n(&g_subscribed, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&g_subscriptions, 1, __ATOMIC_SEQ_CST);
    *subscriber = &g_subscribed;
    return CUPTI_SUCCESS;
}

/* Detaches as CUPTI does: no subscriber, no callback on, no records; a
 * later cuptiSubscribe attaches again. Counted for the harness.
 * STANDIN_FINALIZE_DELAY_MS: the teardown takes that long first (CUPTI's
 * took 2 ms on an H100). */

int cuptiFinalize(void) {
    const char *delay = getenv("STANDIN_FINALIZE_DELAY_MS");
    if (delay)
        usleep(atoi(delay) * 1000);
    __atomic_store_n(&g_callback, NULL, __ATOMIC_SEQ_CST);
    memset(g_enabled, 0, sizeof g_enabled);
    g_kernel_enabled = 0;
    __atomic_add_fetch(&g_finalized, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&g_subscribed, 0, __ATOMIC_SEQ_CST);
    return CUPTI_SUCCESS;
}

int standin_cupti_finalized(void) { return __atomic_load_n(&g_finalized, __ATOMIC_SEQ_CST); }

int standin_cupti_subscribed(void) { return __atomic_load_n(&g_subscribed, __ATOMIC_SEQ_CST); }

int cuptiEnableCallback(uint32_t enable, void *subscriber, uint32_t domain, uint32_t cbid) {
    if (subscriber != &g_subscribed || domain > 3 || cbid >= MAX_CBID)
        return CUPTI_ERROR_INVALID_PARAMETER;
    __atomic_store_n(&g_enabled[domain][cbid], enable != 0, __ATOMIC_SEQ_CST);
    return CUPTI_SUCCESS;
}

int cuptiGetCallbackState(uint32_t *enable, void *subscriber, uint32_t domain, uint32_t cbid) {
    if (subscriber != &g_subscribed || domain > 3 || cbid >= MAX_CBID || enable == NULL)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *enable = __atomic_load_n(&g_enabled[domain][cbid], __ATOMIC_SEQ_CST);
    return CUPTI_SUCCESS;
}

int cuptiActivityRegisterCallbacks(BufferRequestFn request, BufferCompleteFn complete) {
    g_request = request;
    g_complete = complete;
    return CUPTI_SUCCESS;
}

int cuptiActivitySetAttribute(uint32_t attribute, size_t *size, void *value) {
    if (attribute != ATTR_ZEROED_OUT_ACTIVITY_BUFFER || size == NULL || *size != 1 || value == NULL)
        return CUPTI_ERROR_INVALID_PARAMETER;
    g_client_zeroes = *(uint8_t *)value;
    return CUPTI_SUCCESS;
}

/* A buffer just handed out: cleared here unless the client promised it was. */
static void take_buffer(uint8_t *buffer, size_t size) {
    g_buffers_requested++;
    if (!g_client_zeroes) {
        memset(buffer, 0, size);
        g_bytes_cleared += size;
        return;
    }
    for (size_t i = 0; i < size; i++)
        if (buffer[i] != 0) {
            g_buffers_not_zero++;
            return;
        }
}

int cuptiActivityEnable(uint32_t kind) {
    /* STANDIN_CUPTI_REFUSE_KERNELS=1: kernel records cannot be switched on. */
    const char *refuse = getenv("STANDIN_CUPTI_REFUSE_KERNELS");
    if (kind == KIND_CONCURRENT_KERNEL && refuse != NULL && *refuse == '1')
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (kind == KIND_CONCURRENT_KERNEL)
        g_kernel_enabled = 1;
    return CUPTI_SUCCESS;
}

int cuptiActivityDisable(uint32_t kind) {
    if (kind == KIND_CONCURRENT_KERNEL)
        g_kernel_enabled = 0;
    return CUPTI_SUCCESS;
}

int cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, void **record) {
    uint8_t *next = *record == NULL ? buffer : (uint8_t *)*record + sizeof(KernelRecord);
    if (next + sizeof(KernelRecord) > buffer + valid)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = next;
    return CUPTI_SUCCESS;
}

/* Hands the current buffer back to the probe (outside the lock, as CUPTI's
 * worker thread would). */
static void complete_current(void) {
    pthread_mutex_lock(&g_buffer_lock);
    uint8_t *buffer = g_buffer;
    size_t size = g_buffer_size, valid = g_buffer_valid;
    g_buffer = NULL;
    g_buffer_size = g_buffer_valid = 0;
    pthread_mutex_unlock(&g_buffer_lock);
    if (buffer != NULL && g_complete != NULL)
        g_complete(NULL, 0, buffer, size, valid);
}

/* As CUPTI: without CUPTI_ACTIVITY_FLAG_FLUSH_FORCED (1) only completed
 * buffers come back, and the one being filled is not complete; forced, it
 * comes back as it is. */
int cuptiActivityFlushAll(uint32_t flag) {
    if (flag & 1)
        complete_current();
    return CUPTI_SUCCESS;
}

int cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *dropped) {
    (void)ctx;
    (void)stream;
    *dropped = __atomic_exchange_n(&g_dropped, 0, __ATOMIC_SEQ_CST);
    return CUPTI_SUCCESS;
}

uint64_t standin_cupti_now(void) {
    if (g_timestamp != NULL)
        return g_timestamp();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    /* CUPTI's own clock differs from CLOCK_MONOTONIC. */
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + 1000000000ull;
}

int cuptiGetTimestamp(uint64_t *t) {
    *t = standin_cupti_now();
    return CUPTI_SUCCESS;
}

int cuptiActivityRegisterTimestampCallback(TimestampFn f) {
    g_timestamp = f;
    return CUPTI_SUCCESS;
}

/* Stand-in contexts are small structs whose first two words are device and id. */
int cuptiGetContextId(CUcontext ctx, uint32_t *id) {
    if (ctx == NULL)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *id = ((uint32_t *)ctx)[1];
    return CUPTI_SUCCESS;
}

int cuptiGetDeviceId(CUcontext ctx, uint32_t *device) {
    if (ctx == NULL)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *device = ((uint32_t *)ctx)[0];
    return CUPTI_SUCCESS;
}

int cuptiGetResultString(int result, const char **text) {
    *text = result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
                : "CUPTI_ERROR_STAND_IN";
    return CUPTI_SUCCESS;
}

void standin_cupti_api(uint32_t cbid, uint32_t site, const char *name, const void *params,
                       CUresult *result, CUcontext ctx, uint32_t correlation, uint64_t *correlation_data) {
    CallbackFn callback = __atomic_load_n(&g_callback, __ATOMIC_SEQ_CST);
    if (callback == NULL || cbid >= MAX_CBID || !__atomic_load_n(&g_enabled[1][cbid], __ATOMIC_SEQ_CST))
        return;
    __atomic_add_fetch(&g_delivered[cbid], 1, __ATOMIC_SEQ_CST);
    CallbackData data = {
        .callbackSite = site,
        .functionName = name,
        .functionParams = params,
        .functionReturnValue = result,
        .symbolName = name,
        .context = ctx,
        .contextUid = ctx == NULL ? 0 : ((uint32_t *)ctx)[1],
        .correlationData = correlation_data,
        .correlationId = correlation,
    };
    deliver(callback, 1, cbid, &data);
}

void standin_cupti_resource(uint32_t cbid, CUcontext ctx, void *descriptor) {
    CallbackFn callback = __atomic_load_n(&g_callback, __ATOMIC_SEQ_CST);
    if (callback == NULL || cbid >= MAX_CBID || !__atomic_load_n(&g_enabled[3][cbid], __ATOMIC_SEQ_CST))
        return;
    ResourceData data = {.context = ctx, .resourceHandle = 0, .resourceDescriptor = descriptor};
    deliver(callback, 3, cbid, &data);
}

int standin_cupti_kernel_enabled(void) { return g_kernel_enabled; }

void standin_cupti_kernel_record(const KernelRecord *record) {
    if (!g_kernel_enabled || g_request == NULL)
        return;
    for (;;) {
        pthread_mutex_lock(&g_buffer_lock);
        if (g_buffer == NULL) {
            size_t max_records = 0;
            g_request(&g_buffer, &g_buffer_size, &max_records);
            g_buffer_valid = 0;
            if (g_buffer == NULL) {
                __atomic_add_fetch(&g_dropped, 1, __ATOMIC_SEQ_CST);
                pthread_mutex_unlock(&g_buffer_lock);
                return;
            }
            take_buffer(g_buffer, g_buffer_size);
        }
        if (g_buffer_valid + sizeof(KernelRecord) <= g_buffer_size) {
            memcpy(g_buffer + g_buffer_valid, record, sizeof(KernelRecord));
            g_buffer_valid += sizeof(KernelRecord);
            pthread_mutex_unlock(&g_buffer_lock);
            return;
        }
        pthread_mutex_unlock(&g_buffer_lock);
        complete_current();
    }
}

void standin_cupti_set_dropped(size_t dropped) {
    __atomic_store_n(&g_dropped, dropped, __ATOMIC_SEQ_CST);
}

int standin_cupti_enabled(uint32_t domain, uint32_t cbid) {
    return domain < 4 && cbid < MAX_CBID && __atomic_load_n(&g_enabled[domain][cbid], __ATOMIC_SEQ_CST);
}

/* Into $STANDIN_CUPTI_REPORT-buffers, one line: buffers requested, whether the
 * client promised zeroed buffers, bytes the stand-in cleared, and buffers
 * handed out not zeroed after that promise. */
static void write_buffer_report(const char *path) {
    char name[4096];
    snprintf(name, sizeof name, "%s-buffers", path);
    FILE *f = fopen(name, "w");
    if (f == NULL)
        return;
    fprintf(f, "%llu %u %llu %llu\n", (unsigned long long)g_buffers_requested, g_client_zeroes,
            (unsigned long long)g_bytes_cleared, (unsigned long long)g_buffers_not_zero);
    fclose(f);
}

/* At unload (after every exit handler): each driver API id that was delivered
 * or is enabled, as "cbid delivered enabled" lines, into $STANDIN_CUPTI_REPORT,
 * for the harness to compare with what the probe saw. */
__attribute__((destructor)) static void write_report(void) {
    const char *path = getenv("STANDIN_CUPTI_REPORT");
    if (path == NULL || *path == '\0')
        return;
    write_buffer_report(path);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return;
    for (uint32_t cbid = 0; cbid < MAX_CBID; cbid++) {
        uint64_t n = __atomic_load_n(&g_delivered[cbid], __ATOMIC_SEQ_CST);
        int on = __atomic_load_n(&g_enabled[1][cbid], __ATOMIC_SEQ_CST);
        if (n > 0 || on)
            fprintf(f, "%u %llu %d\n", cbid, (unsigned long long)n, on);
    }
    fclose(f);
}
