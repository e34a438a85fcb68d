/* The program the harness runs with and without the probe: it plays a CUDA
 * application against the stand-in libcuda. Everything it prints is
 * deterministic, so its stdout/stderr must be byte-identical either way.
 * Usage: program SCENARIO [N]; scenarios are listed in main(). */
#define _GNU_SOURCE
#include "stand_in.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

CUresult cuInit(unsigned int flags);
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, int device);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream);
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream);
CUresult cuMemPoolCreate(CUmemoryPool *pool, const void *props);
CUresult cuMemPoolDestroy(CUmemoryPool pool);
uint64_t standin_default_pool_reads(void);
int standin_traced(uint32_t cbid);
CUresult cuLibraryLoadData(CUlibrary *library, const void *code, void *a, void *b, unsigned int c, void *d,
                           void *e, unsigned int f);
CUresult cuLibraryUnload(CUlibrary library);
void standin_launch_kernel(const char *name, uint64_t local_total, uint32_t local_per_thread, uint16_t registers,
                           int failed);
void standin_launch_kernel_ex(const char *name);
void standin_launch_graph(void *graph_exec, const char **kernels, int n);
void standin_set_cupti_dropped(size_t dropped);
uint64_t other_library_create(size_t bytes);
int other_library_release(uint64_t handle);
int other_library_async(int pairs);
int other_library_own_pool(int count, size_t bytes);
int c10_tensors(int pairs, int keep);
uint64_t standin_thread_allocations(void);

#define MiB (1024ull * 1024)
#define GiB (1024ull * MiB)

static void setup(void) {
    CUcontext ctx;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS) {
        fprintf(stderr, "stand-in CUDA did not initialise\n");
        exit(70);
    }
}

static int alloc_free(size_t bytes) {
    CUdeviceptr p;
    if (cuMemAlloc_v2(&p, bytes) != CUDA_SUCCESS)
        return 0;
    return cuMemFree_v2(p) == CUDA_SUCCESS;
}

/* --- basic: threads, every call kind, kernel records ------------------- */

enum { SYNC_THREADS = 8, SYNC_PAIRS = 100, CHURN_THREADS = 32, ASYNC_THREADS = 4, ASYNC_PAIRS = 1000 };

static int g_sync_ok[SYNC_THREADS], g_sync_failed[SYNC_THREADS], g_async_ok[ASYNC_THREADS];

static void *sync_worker(void *arg) {
    long t = (long)arg;
    for (int i = 0; i < SYNC_PAIRS; i++)
        g_sync_ok[t] += alloc_free((size_t)(i % 4 + 1) * MiB);
    CUdeviceptr p;
    g_sync_failed[t] += cuMemAlloc_v2(&p, 200 * GiB) == CUDA_ERROR_OUT_OF_MEMORY;
    return NULL;
}

static void *churn_worker(void *arg) {
    (void)arg;
    alloc_free(4096);
    return NULL;
}

static void *async_worker(void *arg) {
    long t = (long)arg;
    for (int i = 0; i < ASYNC_PAIRS; i++) {
        CUdeviceptr p;
        size_t bytes = (size_t)(i % 8 + 1) * 65536;
        CUresult r = (t % 2) ? cuMemAllocAsync_ptsz(&p, bytes, NULL) : cuMemAllocAsync(&p, bytes, NULL);
        if (r == CUDA_SUCCESS && cuMemFreeAsync(p, NULL) == CUDA_SUCCESS)
            g_async_ok[t]++;
    }
    return NULL;
}

static int basic(void) {
    setup();
    uint64_t handle = other_library_create(256 * MiB);
    pthread_t threads[CHURN_THREADS];
    for (long t = 0; t < SYNC_THREADS; t++)
        pthread_create(&threads[t], NULL, sync_worker, (void *)t);
    for (int t = 0; t < SYNC_THREADS; t++)
        pthread_join(threads[t], NULL);
    for (long t = 0; t < CHURN_THREADS; t++)
        pthread_create(&threads[t], NULL, churn_worker, NULL);
    for (int t = 0; t < CHURN_THREADS; t++)
        pthread_join(threads[t], NULL);
    for (long t = 0; t < ASYNC_THREADS; t++)
        pthread_create(&threads[t], NULL, async_worker, (void *)t);
    for (int t = 0; t < ASYNC_THREADS; t++)
        pthread_join(threads[t], NULL);

    int other_async = other_library_async(2048);
    CUmemoryPool pool;
    int pool_ok = 0;
    cuMemPoolCreate(&pool, NULL);
    for (int i = 0; i < 100; i++) {
        CUdeviceptr p;
        if (cuMemAllocFromPoolAsync(&p, MiB, pool, NULL) == CUDA_SUCCESS && cuMemFreeAsync(p, NULL) == CUDA_SUCCESS)
            pool_ok++;
    }
    CUdeviceptr big;
    int async_failed = cuMemAllocAsync(&big, 100 * GiB, NULL) == CUDA_ERROR_OUT_OF_MEMORY;

    standin_set_cupti_dropped(3);
    standin_launch_kernel("gemm", 0, 0, 32, 0);
    standin_launch_kernel("gemm", 0, 0, 32, 0);
    standin_launch_kernel("spill", 3 * GiB, 1024, 255, 0);
    standin_launch_kernel("gemm", MiB, 0, 32, 0);
    standin_launch_kernel("huge", 8 * GiB, 4096, 255, 1);
    standin_launch_kernel("late", 0, 0, 64, 0);

    CUlibrary lib;
    cuLibraryLoadData(&lib, "image", NULL, NULL, 0, NULL, NULL, 0);
    cuLibraryUnload(lib);
    int other_ok = handle != 0 && other_library_release(handle) == CUDA_SUCCESS;

    int sync_ok = 0, sync_failed = 0, async_ok = 0;
    for (int t = 0; t < SYNC_THREADS; t++)
        sync_ok += g_sync_ok[t], sync_failed += g_sync_failed[t];
    for (int t = 0; t < ASYNC_THREADS; t++)
        async_ok += g_async_ok[t];
    printf("basic: sync ok=%d failed=%d async ok=%d pool ok=%d async failed=%d other=%d other async=%d\n", sync_ok,
           sync_failed, async_ok, pool_ok, async_failed, other_ok, other_async);
    fprintf(stderr, "basic: the program's own stderr line\n");
    return 0;
}

/* --- teardown: callbacks after TLS destruction and after the last flush - */

static CUdeviceptr g_before_probe_exit, g_after_probe_exit, g_in_destructor, g_in_thread_key;
static CUlibrary g_library;
static int g_teardown;
static pthread_key_t g_key;

/* Registered after cuInit: runs before the probe's atexit handler but after the
 * main thread's thread-local destructors (glibc runs those first in exit()). */
static void exit_handler_before_probe(void) { cuMemFree_v2(g_before_probe_exit); }

/* Registered before cuInit: runs after the probe's atexit flush. */
static void exit_handler_after_probe(void) {
    if (!g_teardown)
        return;
    cuLibraryUnload(g_library);
    cuMemFree_v2(g_after_probe_exit);
}

/* Runs from _dl_fini, after every atexit handler. */
__attribute__((destructor)) static void program_destructor(void) {
    if (g_teardown)
        cuMemFree_v2(g_in_destructor);
}

/* Runs at thread exit, after that thread's thread-local destructors. */
static void thread_key_destructor(void *value) { cuMemFree_v2((CUdeviceptr)(uintptr_t)value); }

static void *teardown_worker(void *arg) {
    (void)arg;
    alloc_free(MiB); /* the probe has seen this thread */
    pthread_setspecific(g_key, (void *)(uintptr_t)g_in_thread_key);
    return NULL;
}

static int teardown(void) {
    g_teardown = 1;
    atexit(exit_handler_after_probe);
    setup();
    atexit(exit_handler_before_probe);
    pthread_key_create(&g_key, thread_key_destructor);
    cuMemAlloc_v2(&g_before_probe_exit, 3 * MiB);
    cuMemAlloc_v2(&g_after_probe_exit, 5 * MiB);
    cuMemAlloc_v2(&g_in_destructor, 7 * MiB);
    cuMemAlloc_v2(&g_in_thread_key, 9 * MiB);
    cuLibraryLoadData(&g_library, "image", NULL, NULL, 0, NULL, NULL, 0);
    pthread_t t;
    pthread_create(&t, NULL, teardown_worker, NULL);
    pthread_join(t, NULL);
    printf("teardown: main returns\n");
    return 0;
}

/* --- fork: the child's calls never reach the parent's event file -------- */

static int forking(void) {
    setup();
    alloc_free(MiB);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        alloc_free(12345);
        printf("fork: child done\n");
        exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    alloc_free(54321);
    printf("fork: child exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}

/* --- fatal signals ------------------------------------------------------ */

static void say(const char *text) {
    ssize_t ignored = write(2, text, strlen(text));
    (void)ignored;
}

static void segv_handler(int sig, siginfo_t *info, void *uc) {
    (void)uc;
    char line[160];
    snprintf(line, sizeof line, "segv handler: signal %d code %d addr %p\n", sig, info->si_code, info->si_addr);
    say(line);
    signal(SIGSEGV, SIG_DFL);
}

static void abort_handler(int sig, siginfo_t *info, void *uc) {
    (void)uc;
    char line[160];
    snprintf(line, sizeof line, "abort handler: signal %d code %d from self %d\n", sig, info->si_code,
             info->si_pid == getpid());
    say(line);
}

static void queued_handler(int sig, siginfo_t *info, void *uc) {
    (void)uc;
    char line[160];
    snprintf(line, sizeof line, "queued handler: signal %d code %d value %d\n", sig, info->si_code,
             info->si_value.sival_int);
    say(line);
    _exit(3);
}

static void handle(int sig, void (*handler)(int, siginfo_t *, void *)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

static void allocations_then(size_t bytes) {
    for (int i = 0; i < 3; i++) {
        CUdeviceptr p;
        cuMemAlloc_v2(&p, bytes);
    }
}

static int segv(void) {
    handle(SIGSEGV, segv_handler);
    setup();
    allocations_then(777);
    printf("segv: about to fault\n");
    fflush(stdout);
    *(volatile int *)0x10 = 1;
    return 0;
}

static int aborting(void) {
    handle(SIGABRT, abort_handler);
    setup();
    allocations_then(888);
    printf("abort: about to abort\n");
    fflush(stdout);
    abort();
}

/* SIGABRT sent with sigqueue (code SI_QUEUE, a value): the program's handler
 * must see that siginfo, not the one of a re-raise. */
static int queued(void) {
    handle(SIGABRT, queued_handler);
    setup();
    allocations_then(999);
    printf("queued: sending\n");
    fflush(stdout);
    union sigval value = {.sival_int = 42};
    sigqueue(getpid(), SIGABRT, value);
    sleep(10); /* the handler exits first */
    return 0;
}

static int recurse(int depth) {
    volatile char frame[1024];
    frame[depth % 1024] = (char)depth;
    return recurse(depth + 1) + frame[0];
}

static void *overflow_worker(void *arg) {
    (void)arg;
    allocations_then(4242);
    recurse(0);
    return NULL;
}

static int overflow(int on_thread) {
    setup();
    printf("overflow: recursing\n");
    fflush(stdout);
    if (on_thread) {
        pthread_t t;
        pthread_create(&t, NULL, overflow_worker, NULL);
        pthread_join(t, NULL);
        return 0;
    }
    allocations_then(4242);
    return recurse(0);
}

/* --- torch-async: PyTorch's async allocator (stand-in libc10_cuda) ------- */

static int torch_async(void) {
    setup();
    int failed = c10_tensors(1000, 40); /* 40 MiB live: the pool holds 64 MiB */
    CUdeviceptr outside;
    failed += cuMemAlloc_v2(&outside, 16 * MiB) != CUDA_SUCCESS;
    printf("torch-async: failed=%d\n", failed);
    return 0;
}

/* --- async-switch: stream-ordered tracing stops, pools are still measured */

static void pause_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Under the probe, waits (at most 20 s) until it has switched the
 * stream-ordered callbacks off; without it they were never on. */
static void wait_for_switch(void) {
    for (int i = 0; i < 20000 && standin_traced(598); i++)
        pause_ms(1);
}

/* Under the probe, waits (at most 20 s) until its writer thread has read the
 * device pool twice more: one whole poll began after this call. */
static void wait_for_polls(void) {
    if (getenv("CUDA_INJECTION64_PATH") == NULL)
        return;
    uint64_t start = standin_default_pool_reads();
    for (int i = 0; i < 20000 && standin_default_pool_reads() < start + 2; i++)
        pause_ms(1);
}

static int pairs_on_device_pool(int pairs, size_t bytes) {
    int ok = 0;
    for (int i = 0; i < pairs; i++) {
        CUdeviceptr p;
        if (cuMemAllocAsync(&p, bytes, NULL) == CUDA_SUCCESS && cuMemFreeAsync(p, NULL) == CUDA_SUCCESS)
            ok++;
    }
    return ok;
}

static int async_switch(void) {
    setup();
    /* 6,000 calls on one pool: the probe stops tracing after 4,096 of them. */
    int ok = pairs_on_device_pool(3000, 65536);
    wait_for_switch();
    /* Untraced from here: 96 MiB live on the device pool, which grows to
     * 128 MiB with the pairs after them. */
    CUdeviceptr kept[3];
    for (int i = 0; i < 3; i++)
        ok += cuMemAllocAsync(&kept[i], 32 * MiB, NULL) == CUDA_SUCCESS;
    ok += pairs_on_device_pool(1000, 65536);
    wait_for_polls();
    /* A second library's pool (created, so attributed to it), 2 x 48 MiB live. */
    ok += other_library_own_pool(2, 48 * MiB);
    /* A pool of the program's, used and destroyed. */
    CUmemoryPool scratch;
    CUdeviceptr s;
    ok += cuMemPoolCreate(&scratch, NULL) == CUDA_SUCCESS;
    ok += cuMemAllocFromPoolAsync(&s, MiB, scratch, NULL) == CUDA_SUCCESS;
    ok += cuMemFreeAsync(s, NULL) == CUDA_SUCCESS;
    wait_for_polls();
    ok += cuMemPoolDestroy(scratch) == CUDA_SUCCESS;
    for (int i = 0; i < 3; i++)
        ok += cuMemFreeAsync(kept[i], NULL) == CUDA_SUCCESS;
    /* Plain allocations are still traced. */
    CUdeviceptr plain;
    ok += cuMemAlloc_v2(&plain, 16 * MiB) == CUDA_SUCCESS;
    printf("async-switch: ok=%d\n", ok);
    return 0;
}

/* --- bench-pause: the shim pauses kernel records around an autotune
 * benchmark's repeated launches ------------------------------------------ */

static int probe_call(const char *symbol, int arg) {
    const char *probe = getenv("CUDA_INJECTION64_PATH");
    void *lib = probe != NULL ? dlopen(probe, RTLD_NOW | RTLD_NOLOAD) : NULL;
    int (*call)(int) = lib != NULL ? (int (*)(int))dlsym(lib, symbol) : NULL;
    return call != NULL ? call(arg) : -1;
}

static int bench_pause(void) {
    setup();
    standin_launch_kernel("first", 0, 0, 32, 0);
    int paused = probe_call("prewarm_probe_pause_kernel_records", 1);
    standin_launch_kernel("while_paused", 0, 0, 32, 0);
    int resumed = probe_call("prewarm_probe_pause_kernel_records", 0);
    standin_launch_kernel("after_resume", 0, 0, 32, 0);
    /* Records off for good (the shim after the first steps): a pause and a
     * resume then switch nothing on. */
    probe_call("prewarm_probe_set_kernel_records", 0);
    int paused_off = probe_call("prewarm_probe_pause_kernel_records", 1);
    int resumed_off = probe_call("prewarm_probe_pause_kernel_records", 0);
    standin_launch_kernel("after_off", 0, 0, 32, 0);
    printf("paused=%d resumed=%d paused_off=%d resumed_off=%d\n", paused, resumed, paused_off, resumed_off);
    return 0;
}

/* --- hold: a bench holds the probe's callbacks for blocks of steady steps
 * and releases them; an allocation while held is not seen, one after is. */

static int hold(void) {
    setup();
    probe_call("prewarm_probe_set_kernel_records", 0);
    CUdeviceptr a, b, c;
    cuMemAlloc_v2(&a, 3 * MiB);
    int held = probe_call("prewarm_probe_hold_callbacks", 1);
    cuMemAlloc_v2(&b, 5 * MiB);
    int released = probe_call("prewarm_probe_hold_callbacks", 0);
    cuMemAlloc_v2(&c, 7 * MiB);
    printf("held=%d released=%d\n", held, released);
    return 0;
}

/* --- detach: once the watch has ended, CUPTI is detached at the next
 * launch's exit and the probe subscribes again from its own thread; an
 * allocation after that is traced, a launch no longer is. ------------ */

static int detach(void) {
    setup();
    standin_launch_kernel("gemm", 0, 0, 32, 0);
    probe_call("prewarm_probe_set_kernel_records", 0);
    int before = standin_detaches();
    standin_launch_kernel("gemm", 0, 0, 32, 0);
    /* Attached again when the launch that detached returned? The probe
     * attaches only after its callback has returned (0 here). */
    int on_return = standin_attached();
    /* STANDIN_ALLOC_IN_GAP_MIB: an allocation while CUPTI is detached (the
     * attach is slow: STANDIN_ATTACH_DELAY_MS), untraced, kept. */
    const char *gap = getenv("STANDIN_ALLOC_IN_GAP_MIB");
    if (gap) {
        CUdeviceptr g;
        cuMemAlloc_v2(&g, (size_t)atoi(gap) * MiB);
    }
    /* `bare`: nothing attaches again, nothing to wait for. */
    const char *mode = getenv("PREWARM_DOCTOR_DETACH_AFTER_WATCH");
    int bare = mode && strcmp(mode, "bare") == 0;
    /* Until the attach is done: subscribed, and its callbacks on again. */
    for (int i = 0; i < 5000 && !bare && !(standin_attached() && standin_alloc_traced()); i++)
        usleep(1000);
    CUdeviceptr a;
    cuMemAlloc_v2(&a, 3 * MiB);
    standin_launch_kernel("later", 0, 0, 32, 0);
    printf("finalized=%d subscribed=%d on_return=%d\n", standin_detaches() - before,
           standin_attached(), on_return);
    return 0;
}

/* --- first-launches: kernel records around each function's first launch
 * (the default) or on every launch (PREWARM_DOCTOR_KERNEL_RECORDS=all): the
 * same launches either way, so the same first launches and growth. ------ */

static void *other_thread_launches(void *arg) {
    (void)arg;
    standin_launch_kernel("gemm", 0, 0, 32, 0);
    standin_launch_kernel("worker_only", 0, 0, 32, 0);
    return NULL;
}

static int first_launches(void) {
    setup();
    for (int i = 0; i < 3; i++)
        standin_launch_kernel("gemm", 0, 0, 32, 0);
    standin_launch_kernel_ex("triton_ex");
    standin_launch_kernel_ex("triton_ex");
    static int graph_exec;
    const char *nodes[] = {"node_a", "gemm"};
    standin_launch_graph(&graph_exec, nodes, 2);
    standin_launch_graph(&graph_exec, nodes, 2);
    pthread_t tid;
    pthread_create(&tid, NULL, other_thread_launches, NULL);
    pthread_join(tid, NULL);
    standin_launch_kernel("cand", 0, 0, 32, 0);
    int paused = probe_call("prewarm_probe_pause_kernel_records", 1);
    for (int i = 0; i < 3; i++)
        standin_launch_kernel("cand", 0, 0, 32, 0);
    standin_launch_kernel("in_pause", 0, 0, 32, 0);
    int resumed = probe_call("prewarm_probe_pause_kernel_records", 0);
    standin_launch_kernel("after_resume", 0, 0, 32, 0);
    standin_launch_kernel("spill", 3 * GiB, 1024, 255, 0);
    standin_launch_kernel("spill", 3 * GiB, 1024, 255, 0);
    probe_call("prewarm_probe_set_kernel_records", 0);
    standin_launch_kernel("late", 0, 0, 32, 0);
    printf("paused=%d resumed=%d\n", paused, resumed);
    return 0;
}

/* --- pool-reads: the writer's reads of a live pool after the watch ------- */

static int pool_reads(void) {
    setup();
    int ok = pairs_on_device_pool(10, 65536);
    /* The watch ends (the shim after the first steps): the pools are read
     * once there, then by the writer's 100 ms ticks. */
    probe_call("prewarm_probe_set_kernel_records", 0);
    /* A writer tick that began before the switch ends well within this. */
    pause_ms(30);
    uint64_t start = standin_default_pool_reads();
    pause_ms(450);
    printf("pairs=%d reads_after_watch=%llu\n", ok, (unsigned long long)(standin_default_pool_reads() - start));
    return 0;
}

/* --- async-steps: a step on known pools stops stream-ordered tracing ---- */

/* What the shim does at the end of a training step. */
static void step_ended(unsigned step) {
    const char *probe = getenv("CUDA_INJECTION64_PATH");
    void *lib = probe != NULL ? dlopen(probe, RTLD_NOW | RTLD_NOLOAD) : NULL;
    void (*ended)(unsigned) = lib != NULL ? (void (*)(unsigned))dlsym(lib, "prewarm_probe_step_ended") : NULL;
    if (ended != NULL)
        ended(step);
}

static int async_steps(void) {
    setup();
    /* Step 1 finds the device pool, step 2 a pool of the program's; step 3
     * uses only these: its end switches tracing off, long before 4,096
     * calls. */
    int ok = pairs_on_device_pool(100, 65536);
    step_ended(1);
    CUmemoryPool own;
    CUdeviceptr s;
    ok += cuMemPoolCreate(&own, NULL) == CUDA_SUCCESS;
    ok += cuMemAllocFromPoolAsync(&s, MiB, own, NULL) == CUDA_SUCCESS;
    ok += cuMemFreeAsync(s, NULL) == CUDA_SUCCESS;
    ok += pairs_on_device_pool(100, 65536);
    step_ended(2);
    ok += pairs_on_device_pool(100, 65536);
    step_ended(3);
    /* With a call count set, steps stop nothing: no switch to wait for. */
    if (getenv("PREWARM_DOCTOR_POOL_CALLS") == NULL)
        wait_for_switch();
    ok += pairs_on_device_pool(1000, 65536);
    ok += cuMemPoolDestroy(own) == CUDA_SUCCESS;
    printf("async-steps: ok=%d\n", ok);
    return 0;
}

/* --- unused-pool-steps: a library creates a pool it never allocates from
 * with stream-ordered calls (NCCL's, under the default allocator): the
 * steps on it switch tracing off, with nothing counted to say. ---------- */

static int unused_pool_steps(void) {
    setup();
    CUmemoryPool own;
    int ok = cuMemPoolCreate(&own, NULL) == CUDA_SUCCESS;
    alloc_free(1);
    step_ended(1);
    step_ended(2);
    wait_for_switch();
    /* Untraced from here. */
    ok += pairs_on_device_pool(10, 65536);
    ok += cuMemPoolDestroy(own) == CUDA_SUCCESS;
    printf("unused-pool-steps: ok=%d\n", ok);
    return 0;
}

/* --- a panic inside the probe: caught, counted, never printed ------------- */

static int panicking(void) {
    setup();
    alloc_free(111);
    const char *probe = getenv("CUDA_INJECTION64_PATH");
    void *lib = probe != NULL ? dlopen(probe, RTLD_NOW | RTLD_NOLOAD) : NULL;
    int (*trigger)(void) = lib != NULL ? (int (*)(void))dlsym(lib, "prewarm_probe_test_internal_error") : NULL;
    if (trigger != NULL && trigger() != 1)
        printf("panic: the probe did not catch its panic\n");
    alloc_free(222);
    printf("panic: done\n");
    return 0;
}

/* --- steady: no heap allocation in a callback once its thread is known --- */

enum { STEADY_THREADS = 8, STEADY_WARM_UP = 64, STEADY_PAIRS = 2000 };

static uint64_t g_steady_warm_up[STEADY_THREADS], g_steady[STEADY_THREADS];

/* Rounds of traced calls from the same call sites: a cuMemAlloc/cuMemFree
 * pair, a stream-ordered pair (sizes cycling so the pool grows and shrinks)
 * and a library load and unload. */
static void steady_pairs(int n) {
    for (int i = 0; i < n; i++) {
        alloc_free((size_t)(i % 4 + 1) * MiB);
        CUdeviceptr p;
        if (cuMemAllocAsync(&p, (size_t)(i % 8 + 1) * 65536, NULL) == CUDA_SUCCESS)
            cuMemFreeAsync(p, NULL);
        CUlibrary lib;
        if (cuLibraryLoadData(&lib, "image", NULL, NULL, 0, NULL, NULL, 0) == CUDA_SUCCESS)
            cuLibraryUnload(lib);
    }
}

static void *steady_worker(void *arg) {
    long t = (long)arg;
    uint64_t before = standin_thread_allocations();
    steady_pairs(STEADY_WARM_UP);
    uint64_t warm = standin_thread_allocations();
    steady_pairs(STEADY_PAIRS);
    g_steady_warm_up[t] = warm - before;
    g_steady[t] = standin_thread_allocations() - warm;
    return NULL;
}

/* Each thread's heap allocations during its warm-up and during the steady
 * calls after it, as "thread warm_up steady" lines into $STANDIN_ALLOC_REPORT
 * (stdout must not differ with the probe). */
static int steady(void) {
    setup();
    pthread_t threads[STEADY_THREADS];
    for (long t = 0; t < STEADY_THREADS; t++)
        pthread_create(&threads[t], NULL, steady_worker, (void *)t);
    for (int t = 0; t < STEADY_THREADS; t++)
        pthread_join(threads[t], NULL);
    const char *path = getenv("STANDIN_ALLOC_REPORT");
    FILE *f = path != NULL ? fopen(path, "w") : NULL;
    for (int t = 0; f != NULL && t < STEADY_THREADS; t++)
        fprintf(f, "%d %llu %llu\n", t, (unsigned long long)g_steady_warm_up[t], (unsigned long long)g_steady[t]);
    if (f != NULL)
        fclose(f);
    printf("steady: %d threads x %d pairs\n", STEADY_THREADS, STEADY_WARM_UP + STEADY_PAIRS);
    return 0;
}

/* --- bench: per-call cost of the traced calls --------------------------- */

/* CPU time, not wall time: the bench machine may be shared. */
static double cpu_s(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *bench_async_worker(void *arg) {
    long n = (long)arg;
    for (long i = 0; i < n; i++) {
        CUdeviceptr p;
        cuMemAllocAsync(&p, 4096 * (size_t)(i % 16 + 1), NULL);
        cuMemFreeAsync(p, NULL);
    }
    return NULL;
}

static int bench(long n) {
    setup();
    double t0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
    bench_async_worker((void *)n);
    double async1 = (cpu_s(CLOCK_THREAD_CPUTIME_ID) - t0) / (double)n * 1e9;
    pthread_t threads[4];
    t0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
    for (int t = 0; t < 4; t++)
        pthread_create(&threads[t], NULL, bench_async_worker, (void *)n);
    for (int t = 0; t < 4; t++)
        pthread_join(threads[t], NULL);
    double async4 = (cpu_s(CLOCK_PROCESS_CPUTIME_ID) - t0) / (4.0 * (double)n) * 1e9;
    long m = n / 10;
    t0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
    for (long i = 0; i < m; i++)
        alloc_free(MiB);
    double sync = (cpu_s(CLOCK_THREAD_CPUTIME_ID) - t0) / (double)m * 1e9;
    /* Launches of a kernel already launched once: under the probe, the
     * launch callbacks of the first-launch watch (enter and exit each). */
    standin_launch_kernel("bench_kernel", 0, 0, 32, 0);
    t0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
    for (long i = 0; i < n; i++)
        standin_launch_kernel("bench_kernel", 0, 0, 32, 0);
    double launch = (cpu_s(CLOCK_THREAD_CPUTIME_ID) - t0) / (double)n * 1e9;
    printf("BENCH async_pair_ns=%.1f async_pair_4threads_ns=%.1f sync_pair_ns=%.1f launch_ns=%.1f\n", async1, async4,
           sync, launch);
    return 0;
}

/* --- bench-threads: the full allocation path from T threads at once ----- */

static void *bench_sync_worker(void *arg) {
    long n = (long)arg;
    for (long i = 0; i < n; i++)
        alloc_free(MiB * (size_t)(i % 4 + 1));
    return NULL;
}

/* T threads each make N cuMemAlloc/cuMemFree pairs (4 callbacks per pair with
   the probe: enter and exit of each). Prints the process CPU time per traced
   call (contention spent spinning or in futex calls counts; time a thread
   waits descheduled does not, as on a shared machine it would be noise) and
   the wall time per call of one thread. */
static int bench_threads(int threads, long n) {
    enum { MAX_BENCH_THREADS = 64 };
    if (threads < 1 || threads > MAX_BENCH_THREADS || n < 1) {
        fprintf(stderr, "bench-threads: 1..%d threads and at least 1 pair\n", MAX_BENCH_THREADS);
        return 64;
    }
    setup();
    bench_sync_worker((void *)100L); /* warm-up: first sight of the caller */
    pthread_t tids[MAX_BENCH_THREADS];
    double c0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID), w0 = cpu_s(CLOCK_MONOTONIC);
    for (int t = 0; t < threads; t++)
        pthread_create(&tids[t], NULL, bench_sync_worker, (void *)n);
    for (int t = 0; t < threads; t++)
        pthread_join(tids[t], NULL);
    double calls = 2.0 * (double)n * threads;
    double cpu = (cpu_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / calls * 1e9;
    double wall = (cpu_s(CLOCK_MONOTONIC) - w0) / (2.0 * (double)n) * 1e9;
    printf("BENCH call_cpu_ns=%.1f call_wall_ns=%.1f\n", cpu, wall);
    return 0;
}

int main(int argc, char **argv) {
    const char *scenario = argc > 1 ? argv[1] : "";
    if (!strcmp(scenario, "basic"))
        return basic();
    if (!strcmp(scenario, "teardown"))
        return teardown();
    if (!strcmp(scenario, "fork"))
        return forking();
    if (!strcmp(scenario, "segv"))
        return segv();
    if (!strcmp(scenario, "abort"))
        return aborting();
    if (!strcmp(scenario, "queued"))
        return queued();
    if (!strcmp(scenario, "overflow"))
        return overflow(0);
    if (!strcmp(scenario, "overflow-thread"))
        return overflow(1);
    if (!strcmp(scenario, "torch-async"))
        return torch_async();
    if (!strcmp(scenario, "async-switch"))
        return async_switch();
    if (!strcmp(scenario, "bench-pause"))
        return bench_pause();
    if (!strcmp(scenario, "hold"))
        return hold();
    if (!strcmp(scenario, "detach"))
        return detach();
    if (!strcmp(scenario, "first-launches"))
        return first_launches();
    if (!strcmp(scenario, "pool-reads"))
        return pool_reads();
    if (!strcmp(scenario, "async-steps"))
        return async_steps();
    if (!strcmp(scenario, "unused-pool-steps"))
        return unused_pool_steps();
    if (!strcmp(scenario, "panic"))
        return panicking();
    if (!strcmp(scenario, "steady"))
        return steady();
    if (!strcmp(scenario, "bench-threads") && argc > 3)
        return bench_threads(atoi(argv[2]), atol(argv[3]));
    if (!strcmp(scenario, "bench"))
        return bench(argc > 2 ? atol(argv[2]) : 100000);
    fprintf(stderr, "usage: program basic|teardown|fork|segv|abort|queued|overflow|overflow-thread|torch-async|async-switch|bench-pause|first-launches|pool-reads|async-steps|unused-pool-steps|panic|steady|bench [N]|bench-threads T N\n");
    return 64;
}
