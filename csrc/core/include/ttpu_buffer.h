/* ttpu_buffer.h - device storages and graph replays.
 * Part of the public C API: ttpu.h includes every part, and its opening
 * comment states the conventions. */
#ifndef TTPU_BUFFER_H_
#define TTPU_BUFFER_H_

#include <stddef.h>
#include <stdint.h>

#include "ttpu_runtime.h"
#include "ttpu_dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ buffers */

/* A device storage: a flat array of nbytes bytes on one device. Backed by a
 * PJRT buffer once written; may be pending (produced by queued work). The
 * PJRT buffer is replaced, not mutated, by in-place writes, so every view of
 * the storage sees the new version. Ref-counted.
 * Thread-safe: retain and release are atomic; every other call takes the
 * runtime's lock, so two threads writing one storage are ordered by it. */
typedef struct ttpu_buffer ttpu_buffer;

/* Creates an unwritten storage (reads as zeros). Refcount 1. */
ttpu_status* ttpu_buffer_create(ttpu_runtime* rt, int device, size_t nbytes,
                                ttpu_buffer** out);
void ttpu_buffer_retain(ttpu_buffer* b);
void ttpu_buffer_release(ttpu_buffer* b);
/* The release of the storage's owner (the tensor's storage is gone), as
 * ttpu_buffer_release; queued work may still hold the buffer after it,
 * but the engine takes the storage as dropped from here on (its sweep
 * detector: docs/design/shapes.md). */
void ttpu_buffer_release_owner(ttpu_buffer* b);
size_t ttpu_buffer_nbytes(const ttpu_buffer* b);
int ttpu_buffer_device(const ttpu_buffer* b);

/* Replaces the whole storage with host data of `dtype` laid out row-major
 * as `dims` (product * dtype size must equal nbytes). `data` is borrowed
 * and may be freed once this returns. */
ttpu_status* ttpu_buffer_upload(ttpu_buffer* b, const void* data,
                                ttpu_dtype dtype, const int64_t* dims,
                                int ndim);
/* Stores the storage, laid out row-major as `dims` of `dtype`, padded to
 * its bucket in dim d (docs/design/shapes.md): a compiled graph's input
 * whose size in d varies, so that one program serves the bucket. Its
 * content is unchanged. *padded says whether it is padded in d now; a
 * storage padded already (in any dim), a complex one, a size of 1, buckets
 * turned off, or a bucket more than four times the size leave it as it
 * is. */
ttpu_status* ttpu_buffer_pad_dim(ttpu_buffer* b, ttpu_dtype dtype,
                                 const int64_t* dims, int ndim, int d,
                                 int* padded);
/* Copies the whole storage (its nbytes, in storage order) to host `dst`.
 * Waits for pending work. */
ttpu_status* ttpu_buffer_download(ttpu_buffer* b, void* dst, size_t nbytes);
/* Makes dst's content a copy of src's (same nbytes; may cross devices). */
ttpu_status* ttpu_buffer_copy(ttpu_buffer* dst, ttpu_buffer* src);
/* Waits until the storage's current version is computed. */
ttpu_status* ttpu_buffer_wait(ttpu_buffer* b);

/* Host access. Where the plugin's device memory is host memory
 * (ttpu_caps.host_access: the CPU plugin), the host can read and write a
 * storage's bytes where they lie, with no copy: the staged collectives
 * hand them to a host transport this way.
 *
 * ttpu_buffer_host_begin runs the ops that write the storage (with
 * `write`: every op that uses it) and waits for its current version; with
 * `write` it also waits until every program enqueued so far has finished,
 * so that nothing still reads the bytes. *data is then the storage's
 * nbytes in storage order, valid until ttpu_buffer_host_end. With `write`
 * the host may change them in place: they are the storage's content, and
 * ops after the end see them. An unwritten storage first becomes zeros.
 * Meanwhile the version stays allocated and is never donated, even if an
 * op replaces it (its writes then land in the replaced version), and ops
 * that read the storage before the end may see some of the host's writes:
 * order them after it, as with any asynchronous collective.
 * UNIMPLEMENTED when the plugin's memory is not the host's or the
 * version's layout is not the storage's byte order (callers copy then).
 * Thread-safe; end may run on any thread, and must run once per begin. */
typedef struct ttpu_host_access ttpu_host_access;
ttpu_status* ttpu_buffer_host_begin(ttpu_buffer* b, int write, void** data,
                                    ttpu_host_access** out);
void ttpu_buffer_host_end(ttpu_host_access* a);

/* Graph replay. A graph that ran as exactly one program can run again from
 * other storages without recording its ops: the caller maps each storage
 * the program needs to its own (an input or a new output storage) and
 * passes them in the same order. */
/* Thread-safe except ttpu_graph_replay_free, which must not race another
 * call on the same replay (replays run under the runtime's lock). */
typedef struct ttpu_graph_replay ttpu_graph_replay;
/* end_graph, and when the graph ran as one program (not nested, no
 * boundary inside it), *out = its replay (owned by the caller, NULL
 * otherwise). end_graph is this with out = NULL. */
ttpu_status* ttpu_runtime_end_graph_capture(ttpu_runtime* rt,
                                            ttpu_graph_replay** out);
int ttpu_graph_replay_store_count(const ttpu_graph_replay* g);
/* Store k: the storage it was at capture (for identity only: it may be
 * gone later) and whether the program writes it. */
const ttpu_buffer* ttpu_graph_replay_store(const ttpu_graph_replay* g, int k,
                                           int* written);
int ttpu_graph_replay_op_count(const ttpu_graph_replay* g);
/* Runs the program with bufs[k] as store k. *ran = 0, running nothing,
 * when a storage's state differs from the capture's (its size, device,
 * whether it holds a value, the shape the program reads it with, or two
 * stores being one storage): the caller records the graph instead. */
ttpu_status* ttpu_runtime_graph_replay(ttpu_runtime* rt, ttpu_graph_replay* g,
                                       ttpu_buffer* const* bufs, int* ran);
void ttpu_graph_replay_free(ttpu_runtime* rt, ttpu_graph_replay* g);

#ifdef __cplusplus
}
#endif

#endif /* TTPU_BUFFER_H_ */
