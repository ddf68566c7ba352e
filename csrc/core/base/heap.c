/* heap.c - keeping freed host memory for the CPU plugin (see heap.h). */
#include "heap.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int kept;

static void apply(void) {
#ifdef __GLIBC__
  if (!ttpu_env_cpu_heap_keep()) return;
  /* 32 MiB is the largest mmap threshold glibc takes (half its heap
   * size); the trim threshold is an int. The top pad is what a heap keeps
   * beyond its top chunk when it shrinks: a thread's arena (the plugin
   * allocates on its own threads) unmaps a heap that has emptied unless
   * the pad covers a whole heap (64 MiB), and maps it afresh at the next
   * allocation, whatever the trim threshold. */
  kept = mallopt(M_MMAP_THRESHOLD, 32 << 20) && mallopt(M_TRIM_THRESHOLD, 1 << 30) &&
         mallopt(M_TOP_PAD, 64 << 20);
#endif
}

int ttpu_heap_keep_freed(void) {
  pthread_once(&once, apply);
  return kept;
}

int ttpu_heap_release(void) {
#ifdef __GLIBC__
  return malloc_trim(0);
#else
  return 0;
#endif
}
