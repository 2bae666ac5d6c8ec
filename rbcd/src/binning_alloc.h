/* Memory for the random binning tables (rbcd/binning/_binning.pyx).
 *
 * Contract: every block returned here is released with free(); NULL means the
 * allocation failed (the caller reports a MemoryError). */
#ifndef RBCD_BINNING_ALLOC_H
#define RBCD_BINNING_ALLOC_H

#include <stdint.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
/* Table storage. Large tables are probed at random: on 4 KiB pages almost
 * every probe is a TLB miss, so blocks of 2 MiB and more are aligned and
 * advised as huge pages (Linux; a hint, ignored elsewhere). Freed with free(). */
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif
#define RBCD_HUGE (((size_t)1) << 21)
static void *rbcd_big_malloc(size_t bytes)
{
    void *p = NULL;
    if (bytes == 0) bytes = 1;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (bytes >= RBCD_HUGE) {
        if (posix_memalign(&p, RBCD_HUGE, bytes) != 0) return NULL;
        madvise(p, bytes, MADV_HUGEPAGE);
        return p;
    }
#endif
    return malloc(bytes);
}
/* Grow a block (in place where the allocator can, e.g. mremap for large
 * blocks: no copy, no transient double size); advise its 2 MiB-aligned
 * interior as huge pages. */
static void *rbcd_big_realloc(void *p, size_t bytes)
{
    void *q = realloc(p, bytes == 0 ? 1 : bytes);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (q != NULL && bytes >= 2 * RBCD_HUGE) {
        uintptr_t start = ((uintptr_t)q + RBCD_HUGE - 1) & ~(uintptr_t)(RBCD_HUGE - 1);
        uintptr_t stop = ((uintptr_t)q + bytes) & ~(uintptr_t)(RBCD_HUGE - 1);
        if (stop > start) madvise((void *)start, stop - start, MADV_HUGEPAGE);
    }
#endif
    return q;
}
/* A block aligned to a cache line (freed with free()): threads writing
 * disjoint parts of an output array then never share a line at the seams. */
static void *rbcd_line_malloc(size_t bytes)
{
#if defined(_WIN32)
    return malloc(bytes == 0 ? 1 : bytes);
#else
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes == 0 ? 1 : bytes) != 0) return NULL;
    return p;
#endif
}
static void *rbcd_big_calloc(size_t n, size_t size)
{
    void *p;
    if (n != 0 && size > ((size_t)-1) / n) return NULL;
    p = rbcd_big_malloc(n * size);
    if (p != NULL) memset(p, 0, n * size);
    return p;
}

/* Hand the free memory of the allocator back to the system (glibc: the freed
 * pages of every arena; a no-op elsewhere). Fit tables of a few MiB each are
 * served from the heap (glibc raises its mmap threshold after the first ones
 * are freed), so without this their pages stay resident after fit, while Z's
 * large arrays come from fresh mappings. */
static void rbcd_release_free_memory(void)
{
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
}

#endif
