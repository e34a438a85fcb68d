/* A bare CUPTI client, for benches/gpu_first_backward.sh: what CUPTI costs
 * with no probe at all. Loaded by CUDA_INJECTION64_PATH as the probe is; it
 * subscribes with a callback that does nothing and enables no callback
 * (BARE_CUPTI=sub), or also turns on concurrent-kernel activity records with
 * buffers that are dropped (BARE_CUPTI=kernels: malloc'd buffers, which CUPTI
 * clears itself on the launching thread; BARE_CUPTI=kernels-zeroed: fresh
 * anonymous mappings, promised zeroed with CUPTI_ACTIVITY_ATTR_ZEROED_OUT_
 * ACTIVITY_BUFFER, as the probe hands out). No CUPTI header needed:
 * the few entry points are declared here, resolved with dlopen from
 * PREWARM_DOCTOR_CUPTI (the libcupti the doctor found). bare_cupti_function
 * (below) hands its callbacks to a bench that subscribes itself. Build on the GPU
 * machine: gcc -shared -fPIC -O2 -o bare_cupti.so benches/bare_cupti.c -ldl */
#include <dlfcn.h>
#include <sys/mman.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KIND_CONCURRENT_KERNEL 10
#define BUFFER_BYTES (8u << 20)
#define ATTR_ZEROED_OUT_ACTIVITY_BUFFER 5

typedef void (*callback_fn)(void *, int, uint32_t, const void *);
typedef void (*requested_fn)(uint8_t **, size_t *, size_t *);
typedef void (*completed_fn)(void *, uint32_t, uint8_t *, size_t, size_t);

static void nothing(void *user, int domain, uint32_t cbid, const void *data) {
  (void)user; (void)domain; (void)cbid; (void)data;
}

static int mapped;

static void requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  if (mapped) {
    void *p = mmap(NULL, BUFFER_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    *buffer = p == MAP_FAILED ? NULL : p;
  } else {
    *buffer = aligned_alloc(8, BUFFER_BYTES);
  }
  *size = *buffer ? BUFFER_BYTES : 0;
  *max_records = 0;
}

static void completed(void *ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
  (void)ctx; (void)stream; (void)size; (void)valid;
  if (mapped)
    munmap(buffer, BUFFER_BYTES);
  else
    free(buffer);
}

/* For a bench that drives CUPTI from Python in one process
 * (benches/gpu_cupti_module_loads.py, through ctypes): the do-nothing
 * callback (0), the buffer request (1) and completion (2) as C function
 * pointers, so that no Python runs inside CUPTI's callbacks. Buffers then
 * come from fresh mappings: promise CUPTI they are zeroed. */
void *bare_cupti_function(int which) {
  mapped = 1;
  switch (which) {
  case 0: return (void *)nothing;
  case 1: return (void *)requested;
  case 2: return (void *)completed;
  default: return NULL;
  }
}

int InitializeInjection(void) {
  const char *path = getenv("PREWARM_DOCTOR_CUPTI");
  void *lib = dlopen(path && *path ? path : "libcupti.so", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) return 1;
  int (*subscribe)(void **, callback_fn, void *) =
      (int (*)(void **, callback_fn, void *))dlsym(lib, "cuptiSubscribe");
  int (*register_buffers)(requested_fn, completed_fn) =
      (int (*)(requested_fn, completed_fn))dlsym(lib, "cuptiActivityRegisterCallbacks");
  int (*enable)(int) = (int (*)(int))dlsym(lib, "cuptiActivityEnable");
  int (*set_attribute)(int, size_t *, void *) =
      (int (*)(int, size_t *, void *))dlsym(lib, "cuptiActivitySetAttribute");
  if (!subscribe || !register_buffers || !enable) return 1;
  void *subscriber = NULL;
  if (subscribe(&subscriber, nothing, NULL) != 0) return 1;
  const char *mode = getenv("BARE_CUPTI");
  if (mode && strcmp(mode, "kernels-zeroed") == 0 && set_attribute) {
    uint8_t one = 1;
    size_t size = 1;
    mapped = set_attribute(ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &size, &one) == 0;
  }
  if (mode && strncmp(mode, "kernels", 7) == 0 && register_buffers(requested, completed) == 0)
    enable(KIND_CONCURRENT_KERNEL);
  return 1;
}
