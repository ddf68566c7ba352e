/* runtime.h - the runtime object (private to exec/: only the .c files of
 * exec/ include this header; the layers below see the runtime through
 * exec/internal.h). */
#ifndef TTPU_EXEC_RUNTIME_H_
#define TTPU_EXEC_RUNTIME_H_

#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"
#include "../cache/disk.h"
#include "../prog/plan.h"

typedef struct ttpu_window ttpu_window;
typedef struct ttpu_executor_ops ttpu_executor_ops;
typedef struct ttpu_compile_queue ttpu_compile_queue; /* exec/queue.c */
struct ttpu_pool;

/* Between ttpu_runtime_begin_graph and end_graph (exec/graph.c; under mu). */
typedef struct {
  int depth;             /* graphs open (they nest); 0: none */
  ttpu_mode mode_before; /* the mode the outermost graph restores */
  char name[80];         /* the innermost graph's name */
  int runs;              /* programs (and host work: uploads, downloads,
                            copies) the outermost graph did so far */
  ttpu_graph_replay** capture; /* set by end_graph_capture */
  /* The recorded window's owner while a graph is open (exec/window.h;
   * made at the first graph, freed at destroy). */
  struct ttpu_window_owner* owner;
} ttpu_graph_state;

/* Between ttpu_runtime_begin_function and end_function (exec/function.c;
 * under mu): the window and executor set aside per open function. */
#define TTPU_FUNCTION_DEPTH 8
typedef struct {
  int depth;
  struct {
    ttpu_window* window;
    const ttpu_executor_ops* exec;
  } saved[TTPU_FUNCTION_DEPTH];
  struct ttpu_window_owner* owner; /* made at the first function */
} ttpu_function_state;

/* A scalar pack a strict-mode op uploaded (exec/queue.c), kept for the
 * next op with the same values: programs read their pack, never write it,
 * so one device buffer serves every execution. */
#define TTPU_PACKS 16      /* packs kept per device */
#define TTPU_PACK_MAX 8    /* values a kept pack holds at most */
typedef struct {
  ttpu_pjrt_buffer* pb;    /* NULL: an empty entry */
  ttpu_dtype dtype;        /* F64 or I64 */
  int n;
  uint64_t used;           /* when last used, for replacing the oldest */
  int64_t bits[TTPU_PACK_MAX];
} ttpu_pack;

typedef struct {
  ttpu_stats stats;
  ttpu_buffer* rng_state; /* ui64[2] */
  ttpu_pack packs[TTPU_PACKS];
  uint64_t pack_clock;
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
  ttpu_prog_ctx prog;     /* the program layer's context (prog/context.h) */
  /* One op's plan, rebuilt for every op into the same arrays so that
   * an op whose program is cached allocates nothing (exec/queue.c). */
  ttpu_plan op_plan;
  /* The compile queue's pending ops while programs compile on the compile pool
   * (exec/queue.c; NULL until first needed), and the pool (prog/pool.h,
   * started at the first compile it takes, joined at destroy). */
  ttpu_compile_queue* queue;
  struct ttpu_pool* compile_pool;
  /* windows' and graphs' compiles: one thread fewer than compile_pool (at
   * least one), so that a big program's compile leaves the caller a core
   * for what it traces meanwhile */
  struct ttpu_pool* window_pool;
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
  /* Device buffers dropped while executions were pending
   * (ttpu_rt_drop_pjrt), in ticket order from dropped_head: each is
   * destroyed once every ticket up to its own has completed. */
  struct ttpu_dropped* dropped;
  int dropped_head, n_dropped, cap_dropped;
  /* Data-dependent checks of fused windows that ended without the host
   * waiting (kept by the program layer's keep_check hook), oldest first:
   * read where the host next waits (ttpu_rt_take_checks), which raises the
   * first that fired (check_error). */
  struct ttpu_kept_check* checks;
  int n_checks, cap_checks;
  ttpu_status* check_error; /* a kept check that fired, not yet raised */
  int fork_generation;   /* the process's fork generation at creation */
  ttpu_status* async_error; /* first asynchronous failure not yet reported */
  ttpu_runtime_options opts; /* copied at creation, strings owned */
  ttpu_mode mode;        /* the mode ttpu_runtime_mode reports */
  const ttpu_executor_ops* exec; /* runs ops: the mode's, or the graph's */
  ttpu_window* window;   /* recorded ops of fused mode and graphs
                            (exec/fused.c) */
  int composite_depth;   /* composite ops being recorded (group_begin to
                            group_end): their fills of new storages are
                            their own temporaries (exec/window.c) */
  ttpu_graph_state graph;
  ttpu_function_state function;
  char warning[1024];    /* pending warnings, "" when none */
  /* Trace hook (exec/trace.c; under mu). */
  ttpu_trace_fn trace_fn;
  void* trace_user;
  unsigned trace_what;   /* TTPU_TRACE_* bits; 0 when no hook */
  uint64_t trace_launches; /* launches reported so far */
  int trace_open_compiles; /* COMPILE_BEGINs awaiting their END */
};

#endif /* TTPU_EXEC_RUNTIME_H_ */
