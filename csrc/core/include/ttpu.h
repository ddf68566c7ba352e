/* ttpu.h - public C API of the torchtpu engine.
 *
 * The engine loads an XLA PJRT plugin, keeps device storages as ref-counted
 * buffer objects, lowers ATen-shaped op calls to StableHLO through one
 * lowering table, compiles them (with a cache) and runs them asynchronously.
 * It has no dependency on PyTorch and is usable from plain C.
 *
 * Conventions (after pjrt_c_api.h and the IREE runtime):
 *  - Every function that can fail returns a ttpu_status*; NULL is success.
 *    A non-NULL status is owned by the caller: free it with
 *    ttpu_status_free().
 *  - Outputs are returned through pointer arguments.
 *  - Ownership is stated per function: "borrowed" (caller keeps it),
 *    "caller frees", "ref-counted" (retain/release).
 *  - All exported symbols start with ttpu_ / TTPU_.
 *
 * Threads. A runtime and everything made from it (buffers, graph replays)
 * may be used from any number of threads at once: every call that touches
 * engine state takes the runtime's one lock, so calls on one runtime run
 * one at a time, in the order they take it (the plugin's work itself runs
 * asynchronously, off that lock). A host read (ttpu_buffer_download)
 * enqueues its copy under the lock and waits for the data outside it;
 * ttpu_runtime_synchronize and ttpu_buffer_wait wait with the lock held,
 * so other threads' calls wait behind them. The eager mode, the window limit, the program cache
 * size and the disk cache directory are per runtime, not per thread. What
 * is not thread-safe is said at the type: a ttpu_status belongs to the
 * thread that got it; ttpu_op_call and ttpu_tensor are borrowed for the
 * duration of one call.
 *
 * Fork. A runtime belongs to the process that created it. In a child made
 * by fork() after that, every call returns TTPU_FAILED_PRECONDITION (or,
 * for calls without a status, does nothing): the plugin's threads were not
 * copied into the child and a lock held at fork() would never be released.
 * A child creates no runtime of its own from the parent's; it uses the
 * 'spawn' start method (a fresh process) to reach the device.
 */
#ifndef TTPU_H_
#define TTPU_H_

/* The API by concept; each part can be included on its own. */
#include "ttpu_status.h"   /* status values */
#include "ttpu_dtype.h"    /* element types */
#include "ttpu_runtime.h"  /* runtime, modes, program cache, diagnostics */
#include "ttpu_buffer.h"   /* storages, graph replays */
#include "ttpu_device.h"   /* events, device info, memory statistics */
#include "ttpu_op.h"       /* op calls */
#include "ttpu_trace.h"    /* trace hooks */

#endif /* TTPU_H_ */
