/* Linked into the stand-in program: malloc and its kin, interposed for the
 * whole process (the program's definitions come first in symbol lookup, so
 * the probe's Rust allocator lands here too), counted per thread and passed
 * on to glibc. It lets a scenario ask how many heap allocations its own
 * thread made during a stretch of traced calls: with the probe injected,
 * those are the probe's callbacks' allocations. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

void *__libc_malloc(size_t bytes);
void *__libc_calloc(size_t count, size_t bytes);
void *__libc_realloc(void *old, size_t bytes);
void *__libc_memalign(size_t alignment, size_t bytes);
void __libc_free(void *p);

/* Initial-exec TLS of the program: reading it never allocates. */
static __thread uint64_t t_allocations;

uint64_t standin_thread_allocations(void) { return t_allocations; }

void *malloc(size_t bytes) {
    t_allocations++;
    return __libc_malloc(bytes);
}

void *calloc(size_t count, size_t bytes) {
    t_allocations++;
    return __libc_calloc(count, bytes);
}

void *realloc(void *old, size_t bytes) {
    t_allocations++;
    return __libc_realloc(old, bytes);
}

void *memalign(size_t alignment, size_t bytes) {
    t_allocations++;
    return __libc_memalign(alignment, bytes);
}

void *aligned_alloc(size_t alignment, size_t bytes) {
    t_allocations++;
    return __libc_memalign(alignment, bytes);
}

int posix_memalign(void **out, size_t alignment, size_t bytes) {
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0)
        return EINVAL;
    t_allocations++;
    void *p = __libc_memalign(alignment, bytes);
    if (p == NULL)
        return ENOMEM;
    *out = p;
    return 0;
}

void free(void *p) { __libc_free(p); }
