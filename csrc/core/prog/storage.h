/* storage.h - the storage object and its versions (internal to the
 * engine: prog/ and the layers above it). A storage (ttpu_buffer, opaque
 * in the public API) is ref-counted and holds its current version, a
 * PJRT buffer replaced, never mutated, by each program that writes it.
 * The program layer hands results to storages (ttpu_prog_set_version);
 * the runtime (exec/) creates, accounts and frees them. Every field is
 * under the owning runtime's lock, refs excepted. */
#ifndef TTPU_PROG_STORAGE_H_
#define TTPU_PROG_STORAGE_H_

#include <stdatomic.h>

#include "context.h"

struct ttpu_buffer {
  atomic_int refs;
  ttpu_runtime* rt;
  int device;
  size_t nbytes;
  /* Current version; NULL while never written (reads as zeros). */
  ttpu_pjrt_buffer* pb;
  /* Shape the current version was written with: row-major, so its flat
   * order is the storage's byte order. */
  ttpu_dtype phys_dtype;
  int phys_ndim;
  int64_t phys_dims[TTPU_MAX_DIMS];
  /* The error of a dropped op that was to write it (exec/strict.c): a
   * read raises it; the next version clears it. */
  ttpu_status* error;
  /* Host accesses of the current version (exec/runtime.c), or NULL: while
   * one is open the version is pinned, and replacing it hands it to the
   * pin, which destroys it at the last access's end. */
  struct ttpu_host_pin* pin;
};

/* One pinned version and the host accesses open on it. */
struct ttpu_host_pin {
  ttpu_pjrt_buffer* pb;
  int refs;
};

/* Replaces b's version with pb (taken), written with the given shape;
 * clears b's error. The version replaced is destroyed on pc's client, or
 * left to its pin. */
void ttpu_prog_set_version(ttpu_prog_ctx* pc, ttpu_buffer* b,
                           ttpu_pjrt_buffer* pb, ttpu_dtype dtype, int ndim,
                           const int64_t* dims);

#endif /* TTPU_PROG_STORAGE_H_ */
