/* The probe's pool reads, alone, for benches/gpu_nvml_contention.py: a
 * native thread that reads device 0's current memory pool as the probe's
 * writer thread does (its handle from cuDeviceGetMemPool once, then reserved
 * current, reserved high-water and used current with cuMemPoolGetAttribute)
 * every PERIOD microseconds, until stopped. Native, because a Python thread
 * takes the GIL at every wake-up, which would slow a Python training step by
 * itself where the probe's thread never does. At a 1 ms period (100 times
 * the probe's 100 ms) a read that holds up the training's stream-ordered
 * allocations shows a hundred times larger in the same units.
 *
 * C entry points (ctypes): pr_start(period_us) -> 0, or -1 no libcuda,
 * -2 no pool functions, -3 no pool for device 0, -4 no thread, -5 already
 * running; pr_stop() -> reads made; pr_busy_ns() -> their time in all;
 * pr_max_ns() -> the slowest; pr_errors() -> attribute reads the driver
 * refused (the reads would then not be the probe's). libcuda.so.1 is the process's own (dlopen).
 * Build: gcc -shared -fPIC -O2 -o pool_reader.so benches/pool_reader.c -ldl -lpthread */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

typedef int (*get_pool_fn)(void **pool, int device);
typedef int (*get_attribute_fn)(void *pool, int attribute, void *value);

/* CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, _RESERVED_MEM_HIGH, _USED_MEM_CURRENT */
static const int ATTRIBUTES[] = {5, 6, 7};

static get_attribute_fn get_attribute;
static void *pool;
static pthread_t thread;
static atomic_int running;
static atomic_int stopping;
static unsigned period_us;
static atomic_ulong reads;
static atomic_ulong busy_ns;
static atomic_ulong max_ns;
static atomic_ulong errors;

static unsigned long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (unsigned long)t.tv_sec * 1000000000ul + (unsigned long)t.tv_nsec;
}

static void read_once(void) {
  unsigned long t0 = now_ns();
  uint64_t value;
  for (unsigned i = 0; i < sizeof ATTRIBUTES / sizeof ATTRIBUTES[0]; i++)
    if (get_attribute(pool, ATTRIBUTES[i], &value) != 0)
      atomic_fetch_add(&errors, 1);
  unsigned long spent = now_ns() - t0;
  atomic_fetch_add(&reads, 1);
  atomic_fetch_add(&busy_ns, spent);
  unsigned long seen = atomic_load(&max_ns);
  while (spent > seen && !atomic_compare_exchange_weak(&max_ns, &seen, spent)) {
  }
}

static void *loop(void *unused) {
  (void)unused;
  struct timespec period = {period_us / 1000000u, (long)(period_us % 1000000u) * 1000};
  while (!atomic_load(&stopping)) {
    nanosleep(&period, NULL);
    if (atomic_load(&stopping))
      break;
    read_once();
  }
  return NULL;
}

int pr_start(unsigned period) {
  if (atomic_load(&running))
    return -5;
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!cuda)
    cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (!cuda)
    return -1;
  get_pool_fn get_pool = (get_pool_fn)dlsym(cuda, "cuDeviceGetMemPool");
  get_attribute = (get_attribute_fn)dlsym(cuda, "cuMemPoolGetAttribute");
  if (!get_pool || !get_attribute)
    return -2;
  if (get_pool(&pool, 0) != 0 || !pool)
    return -3;
  period_us = period ? period : 1;
  atomic_store(&reads, 0);
  atomic_store(&busy_ns, 0);
  atomic_store(&max_ns, 0);
  atomic_store(&errors, 0);
  atomic_store(&stopping, 0);
  if (pthread_create(&thread, NULL, loop, NULL) != 0)
    return -4;
  atomic_store(&running, 1);
  return 0;
}

unsigned long pr_stop(void) {
  if (atomic_load(&running)) {
    atomic_store(&stopping, 1);
    pthread_join(thread, NULL);
    atomic_store(&running, 0);
  }
  return atomic_load(&reads);
}

unsigned long pr_busy_ns(void) { return atomic_load(&busy_ns); }

unsigned long pr_max_ns(void) { return atomic_load(&max_ns); }

unsigned long pr_errors(void) { return atomic_load(&errors); }
