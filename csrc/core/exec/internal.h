/* internal.h - the runtime's narrow interface for the executors, the
 * collectives (coll/) and the glue-facing entry points: the runtime's
 * struct stays private to exec/ (exec/runtime.h); these functions are all
 * coll/ sees of it. The layers below (prog/, ops/, ...) never include it.
 * Unless a comment says otherwise, each is called under the runtime's lock
 * (ttpu_rt_enter / ttpu_rt_lock). */
#ifndef TTPU_EXEC_INTERNAL_H_
#define TTPU_EXEC_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>

#include "ttpu.h"
#include "../pjrt/ttpu_pjrt.h"
#include "../hlo/ttpu_hlo.h"
#include "../ops/ttpu_lower.h"
#include "../cache/cache.h"
#include "../prog/context.h"
#include "../prog/storage.h"

/* The current executor's interface (exec/run.c, under rt->mu). Every
 * engine entry point that touches storages calls one of these first, so
 * that ops an executor holds back (a fused window) run before anything
 * else sees their storages.
 *
 * ttpu_exec_flush runs everything held back; ttpu_exec_touch only what
 * storage b depends on: what writes it (for a read of b, writing 0), or
 * anything that touches it (writing: b is about to change). */
ttpu_status* ttpu_exec_flush(ttpu_runtime* rt, ttpu_window_end why);
ttpu_status* ttpu_exec_touch(ttpu_runtime* rt, const ttpu_buffer* b,
                             int writing);
/* Before a copy of b to the host: ttpu_exec_touch, or more where the
 * executor ends its held-back work at host reads (fused mode). */
ttpu_status* ttpu_exec_host_read(ttpu_runtime* rt, const ttpu_buffer* b);
/* An upload, download or storage copy happened (under rt->mu): inside a
 * compiled graph it is work its program does not do, so the graph cannot
 * be replayed. */
void ttpu_exec_note_host_work(ttpu_runtime* rt);

/* Queues a warning for the glue to raise (ttpu_runtime_take_warning),
 * after any already pending (under rt->mu). */
void ttpu_rt_warn(ttpu_runtime* rt, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Drops a reference with rt->mu held. */
void ttpu_rt_release_locked(ttpu_buffer* b);

/* Gives an unwritten storage its zeros as a flat version of
 * nbytes / size(dt) elements of dt, uploaded (under rt->mu). */
ttpu_status* ttpu_rt_zero_version(ttpu_runtime* rt, ttpu_buffer* b,
                                  ttpu_dtype dt);
/* Accounting of device bytes (under rt->mu). */
void ttpu_rt_account(ttpu_runtime* rt, int device, int64_t delta_bytes,
                     int64_t delta_buffers);
/* Records that program e was enqueued on device (under rt->mu): its
 * completion event (NULL when the plugin gave none) is awaited by
 * synchronize, and e's executable outlives the execution even when the
 * cache evicts it meanwhile. Call once per event of one launch. */
void ttpu_rt_add_pending(ttpu_runtime* rt, int device, ttpu_cache_entry* e,
                         ttpu_pjrt_event* ev);
/* Destroys a device buffer nothing refers to any more once every execution
 * enqueued so far has finished (under rt->mu; pb may be NULL). Destroying
 * it at once would wait there for the executions that read it (the XLA
 * CPU plugin's buffer destroy does), and the host would stop issuing
 * work for as long as the device runs it. */
void ttpu_rt_drop_pjrt(ttpu_runtime* rt, ttpu_pjrt_buffer* pb);
/* Reads the data-dependent checks kept by windows that ended without the
 * host waiting, waiting for their programs, and returns the first that
 * fired in place of s (freed), else s (under rt->mu; s may be NULL): a
 * kept check is older than anything s, the flush before the wait, found.
 * Every point where the host waits for the device calls it, so such an
 * error is raised there. */
ttpu_status* ttpu_rt_take_checks(ttpu_runtime* rt, ttpu_status* s);

/* The runtime's parts collectives use: the program context it embeds
 * (what prog/ is called with), and the pieces below. */
ttpu_prog_ctx* ttpu_rt_prog(ttpu_runtime* rt);
ttpu_pjrt_client* ttpu_rt_client(const ttpu_runtime* rt);
const ttpu_runtime_options* ttpu_rt_options(const ttpu_runtime* rt);
/* Device `device`'s counters (device checked by the caller). */
ttpu_stats* ttpu_rt_stats(ttpu_runtime* rt, int device);
/* Device `device`'s rng state storage (ui64[2]), borrowed. */
ttpu_buffer* ttpu_rt_rng_state(ttpu_runtime* rt, int device);
/* The eager mode ttpu_runtime_mode reports. */
ttpu_mode ttpu_rt_mode(const ttpu_runtime* rt);

/* Takes and releases rt->mu (ttpu_rt_lock: no fork check, for callers
 * that made it, or that may not fail). */
void ttpu_rt_lock(ttpu_runtime* rt);
void ttpu_rt_unlock(ttpu_runtime* rt);
/* Takes rt->mu, or returns the error of a forked child without touching
 * the lock: a thread of the parent may have held it at fork(), and the
 * plugin's threads do not exist in the child. */
ttpu_status* ttpu_rt_enter(ttpu_runtime* rt);
/* The same check without the lock: NULL, or the forked-child error. */
ttpu_status* ttpu_rt_check_fork(const ttpu_runtime* rt);
/* Whether rt was created in this process's parent, before a fork(). */
int ttpu_rt_forked(const ttpu_runtime* rt);

/* Trace hook reports (exec/trace.c, under rt->mu); each does nothing
 * unless the hook asked for its kind. compile_end follows compile_begin
 * on every path, success or not. */
void ttpu_rt_trace_compile_begin(ttpu_runtime* rt, int device,
                                 const char* what, int n_ops);
void ttpu_rt_trace_compile_end(ttpu_runtime* rt, int device, const char* what,
                               int n_ops, int from_disk, int failed);
/* The clock to pass to ttpu_rt_trace_launch, read just before a launch:
 * 0 when launches are not traced. */
int64_t ttpu_rt_trace_clock(const ttpu_runtime* rt);
/* A program was enqueued (after ttpu_pjrt_execute, before its event goes
 * to ttpu_rt_add_pending): reports LAUNCH, and DONE once `done` is ready
 * (at once when done is NULL). began_ns: ttpu_rt_trace_clock before it. */
void ttpu_rt_trace_launch(ttpu_runtime* rt, int device, const char* what,
                          int n_ops, int64_t began_ns, ttpu_pjrt_event* done);


#endif /* TTPU_EXEC_INTERNAL_H_ */
