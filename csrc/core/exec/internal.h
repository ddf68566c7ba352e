/* internal.h - the runtime and storage objects (internal). */
#ifndef TTPU_EXEC_INTERNAL_H_
#define TTPU_EXEC_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>

#include "ttpu.h"
#include "../pjrt/ttpu_pjrt.h"
#include "../hlo/ttpu_hlo.h"
#include "../ops/ttpu_lower.h"
#include "../cache/cache.h"
#include "../cache/disk.h"

#define TTPU_MAX_DEVICES 64

struct ttpu_buffer {
  atomic_int refs;
  ttpu_runtime* rt;
  int device;
  size_t nbytes;
  /* Current version; NULL while never written (reads as zeros). Replaced,
   * never mutated, under rt->mu. */
  ttpu_pjrt_buffer* pb;
  /* Shape the current version was written with: row-major, so its flat
   * order is the storage's byte order. */
  ttpu_dtype phys_dtype;
  int phys_ndim;
  int64_t phys_dims[TTPU_MAX_DIMS];
};

typedef struct ttpu_window ttpu_window;
typedef struct ttpu_executor_ops ttpu_executor_ops;

/* Between ttpu_runtime_begin_graph and end_graph (exec/graph.c; under mu). */
typedef struct {
  int depth;             /* graphs open (they nest); 0: none */
  ttpu_mode mode_before; /* the mode the outermost graph restores */
  char name[80];         /* the innermost graph's name */
  int runs;              /* programs (and host work: uploads, downloads,
                            copies) the outermost graph did so far */
  ttpu_graph_replay** capture; /* set by end_graph_capture */
} ttpu_graph_state;

typedef struct {
  ttpu_stats stats;
  ttpu_buffer* rng_state; /* ui64[2] */
  /* Storage counts beyond stats' bytes (exec/runtime.c). */
  int64_t peak_live_buffers;
  int64_t allocations, frees, allocated_bytes, freed_bytes;
  /* The last event recorded on the device (retained): the next one
   * completes after it. */
  ttpu_event* last_event;
  int event_callbacks; /* events' plugin callbacks yet to run (event_mu) */
} ttpu_device_state;

struct ttpu_runtime {
  ttpu_pjrt_plugin* plugin;
  ttpu_pjrt_client* client;
  int device_count;
  /* One lock for the engine's mutable state: op runs, buffer versions,
   * cache, stats. PyTorch calls us from several threads (autograd). */
  pthread_mutex_t mu;
  ttpu_cache* cache;
  ttpu_device_state dev[TTPU_MAX_DEVICES];
  /* Guards dev[].event_callbacks, which synchronize waits to drain, so
   * that events are complete once it returns (exec/runtime.c). */
  pthread_mutex_t event_mu;
  pthread_cond_t event_cv;
  /* Completion events of enqueued executions, awaited by synchronize. */
  ttpu_pjrt_event** pending;
  int* pending_device;
  int64_t* pending_ticket; /* the execution each event completes */
  int n_pending, cap_pending;
  int64_t exec_ticket;   /* executions enqueued so far (their tickets) */
  /* Executables evicted from the cache while an execution of theirs may
   * still run: destroyed once every ticket up to theirs has completed. */
  struct ttpu_retired* retired;
  int n_retired, cap_retired;
  int64_t programs_reloaded; /* evicted programs needed again */
  int fork_generation;   /* the process's fork generation at creation */
  ttpu_status* async_error; /* first asynchronous failure not yet reported */
  char last_reason[512];
  struct ttpu_last_sig* last_sigs; /* per op id: see prog/plan.c */
  int64_t ops_run;       /* strict/debug ops so far (recompile warning) */
  int n_last_sigs;
  ttpu_runtime_options opts; /* copied at creation, strings owned */
  ttpu_mode mode;        /* the mode ttpu_runtime_mode reports */
  const ttpu_executor_ops* exec; /* runs ops: the mode's, or the graph's */
  ttpu_window* window;   /* recorded ops of fused mode and graphs
                            (exec/fused.c) */
  ttpu_graph_state graph;
  ttpu_disk* disk;       /* persistent cache, NULL when off (cache/disk.c) */
  ttpu_compile_record* log; /* ring of the last TTPU_LOG_CAP compiles */
  int64_t n_log;
  char warning[1024];    /* pending warnings, "" when none */
  /* Trace hook (exec/trace.c; under mu). */
  ttpu_trace_fn trace_fn;
  void* trace_user;
  unsigned trace_what;   /* TTPU_TRACE_* bits; 0 when no hook */
  uint64_t trace_launches; /* launches reported so far */
  int trace_open_compiles; /* COMPILE_BEGINs awaiting their END */
};

#define TTPU_LOG_CAP 4096

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
/* An upload, download or storage copy happened (under rt->mu): inside a
 * compiled graph it is work its program does not do, so the graph cannot
 * be replayed. */
void ttpu_exec_note_host_work(ttpu_runtime* rt);

/* A storage's state as the fused window sees it: 1 and its current shape
 * if the window touched it (has_value: it holds a value), else 0. */
int ttpu_window_lookup(const ttpu_window* w, const ttpu_buffer* b,
                       int* has_value, ttpu_dtype* dt, int* nd, int64_t* dims);

/* Queues a warning for the glue to raise (ttpu_runtime_take_warning),
 * after any already pending (under rt->mu). */
void ttpu_rt_warn(ttpu_runtime* rt, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Drops a reference with rt->mu held. */
void ttpu_rt_release_locked(ttpu_buffer* b);

/* Accounting of device bytes (under rt->mu). */
void ttpu_rt_account(ttpu_runtime* rt, int device, int64_t delta_bytes,
                     int64_t delta_buffers);
/* Replaces a storage's version (under rt->mu). Takes ownership of pb. */
void ttpu_rt_set_version(ttpu_buffer* b, ttpu_pjrt_buffer* pb,
                         ttpu_dtype dtype, int ndim, const int64_t* dims);
/* Records that program e was enqueued on device (under rt->mu): its
 * completion event (NULL when the plugin gave none) is awaited by
 * synchronize, and e's executable outlives the execution even when the
 * cache evicts it meanwhile. Call once per event of one launch. */
void ttpu_rt_add_pending(ttpu_runtime* rt, int device, ttpu_cache_entry* e,
                         ttpu_pjrt_event* ev);

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

/* Lowering table (ops/table.c): the definition of op id `op`, or NULL. */
const ttpu_op_def* ttpu_op_def_get(int op);

#endif /* TTPU_EXEC_INTERNAL_H_ */
