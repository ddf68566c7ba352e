/* heap.h - the process heap as the XLA CPU plugin's device memory
 * (internal).
 *
 * On the CPU plugin every device buffer and every program's temporaries
 * are host allocations. glibc serves large ones with fresh mappings and
 * trims freed memory at the top of a heap, so a training step that frees
 * and reallocates the same buffers each step faults its pages in again
 * each step (4-layer LLaMA step, d=256: 6,500 faults and a tenth of the
 * step's CPU time). ttpu_heap_keep_freed keeps freed memory for reuse, as
 * a device allocator's cache does: allocations up to 32 MiB come from the
 * heap, up to 1 GiB of free heap stays mapped, and a thread's heap that
 * empties (the plugin allocates on its own threads too) stays mapped
 * rather than being unmapped and faulted in again at the next step.
 * ttpu_heap_release gives the free memory back (torch.tpu.empty_cache). */
#ifndef TTPU_BASE_HEAP_H_
#define TTPU_BASE_HEAP_H_

/* Applies the setting once per process (later calls only answer);
 * returns 1 when it is in effect (glibc, TORCHTPU_CPU_HEAP not "release",
 * and no malloc tuning of the user's own in the environment), else 0.
 * Thread-safe. */
int ttpu_heap_keep_freed(void);
/* Returns the heap's free memory to the system (malloc_trim); 0 where
 * that is not available. */
int ttpu_heap_release(void);

#endif
