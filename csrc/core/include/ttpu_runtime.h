/* ttpu_runtime.h - the runtime: plugin, devices, modes, program cache, diagnostics.
 * Part of the public C API: ttpu.h includes every part, and its opening
 * comment states the conventions. */
#ifndef TTPU_RUNTIME_H_
#define TTPU_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#include "ttpu_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ runtime */

/* The one registry object: plugin, client, devices, compile cache, stats.
 * Thread-safe: every call on a runtime may come from any thread (each takes
 * the runtime's one lock), except ttpu_runtime_destroy, which must be the
 * last call (no other thread using it or its buffers). */
typedef struct ttpu_runtime ttpu_runtime;

/* Eager execution modes (DESIGN.md): debug runs each op synchronously, so
 * an error surfaces at its op; strict enqueues one program per op and
 * returns (the default); fused records ops and runs runs of them as one
 * program at a boundary (host read, synchronize, op limit, a repeating
 * step's start). */
typedef enum {
  TTPU_MODE_STRICT = 0,
  TTPU_MODE_DEBUG = 1,
  TTPU_MODE_FUSED = 2,
} ttpu_mode;

/* Marks an options struct filled by ttpu_runtime_options_from_env. */
#define TTPU_OPTIONS_FROM_ENV 0x7470756fu

/* Every switch the engine has. A struct zero-initialised (or filled only
 * in its first four fields) means "the defaults, from the environment":
 * ttpu_runtime_create fills the other fields itself. To set any of the
 * others, start from ttpu_runtime_options_from_env. The runtime copies the
 * struct at creation (strings duplicated); the caller's copy may go.
 * Not thread-safe: a plain struct, owned by its caller. */
typedef struct {
  /* Path of the PJRT plugin library; NULL = discover (see ttpu_plugin_find).*/
  const char* plugin_path;
  /* Devices the CPU plugin creates; 0 = plugin default (1 for us). */
  int cpu_device_count;
  /* NULL-terminated directories (site-packages) to discover the plugin in
   * when plugin_path is NULL; may be NULL. */
  const char* const* search_dirs;
  /* Most compiled programs kept loaded at once (0: the default, from
   * TORCHTPU_PROGRAM_CACHE_SIZE, else 1024; see
   * ttpu_runtime_set_program_cache_size). */
  int64_t program_cache_size;
  /* TTPU_OPTIONS_FROM_ENV when the fields below were set (by
   * ttpu_runtime_options_from_env, then perhaps changed); anything else:
   * they are read from the environment at creation. */
  uint32_t initialized;
  /* TORCHTPU_EAGER_MODE: debug, strict (default) or fused. */
  ttpu_mode mode;
  /* TORCHTPU_FUSED_MAX_OPS: most ops one fused window holds; <= 0: 1000. */
  int fused_max_ops;
  /* TORCHTPU_FUSED_REPEATS: 1 (default) runs a fused window's repeated
   * runs of ops (identical layers) as one window per copy, so that they
   * share one program; 0 keeps each window whole. */
  int fused_repeats;
  /* TORCHTPU_RECOMPILE_WARN: warn after an op recompiled this many times
   * in a row for the same reason (default 8; 0 never warns). */
  int recompile_warn;
  /* TORCHTPU_DUMP_DIR: every compiled program's StableHLO is written
   * there; "": no dump. NULL (what from_env leaves): the variable is read
   * at each compile, so it can be set while the process runs. */
  const char* dump_dir;
  /* TORCHTPU_DEBUG_HLO set: a program that fails to compile is printed to
   * stderr. */
  int debug_hlo;
  /* TORCHTPU_CHECK_INDICES: 1 reads data-dependent checks (index bounds),
   * 0 skips them; -1 (what from_env leaves): the variable is read at each
   * check ("0" skips). */
  int check_indices;
  /* TORCHTPU_DISK_CACHE: 0 turns the persistent compile cache off. */
  int disk_cache;
  /* TORCHTPU_CACHE_DIR, default $XDG_CACHE_HOME/torchtpu, else
   * ~/.cache/torchtpu; NULL or "": no persistent cache. */
  const char* cache_dir;
  /* TORCHTPU_CACHE_MAX_MB in bytes; <= 0: the default (2 GiB). */
  int64_t cache_max_bytes;
  /* TORCHTPU_COMPILE_THREADS: threads that compile strict mode's programs
   * while later ops are enqueued; default: the cores the process may run
   * on, at most 16. A data-dependent check's error, and an out-of-memory
   * of an op storing 256 MiB or more, are still raised at the op; a failed
   * compile or launch of an op still compiling is raised at the next point
   * that waits for it, named with its op. 1: every program compiles on the
   * calling thread and every error is raised at its op. */
  int compile_threads;
  /* TORCHTPU_CPU_OPT_LEVEL: the XLA CPU plugin's code generator
   * optimization level (xla_backend_optimization_level), 0-3, or -1 for
   * XLA's own default (3). Default 2: one-op programs compile in about
   * two thirds of the time XLA's default takes, with no steady-state
   * difference measured beyond the noise (README, "Cold start"). Other
   * plugins keep their defaults. */
  int cpu_opt_level;
  /* TORCHTPU_CPU_SMALL_PROGRAM_ELEMENTS: on the XLA CPU plugin, a program
   * whose every tensor holds at most this many elements compiles with
   * XLA's older loop emitters, in about 60% of the time, with no run-time
   * difference at that size; larger programs keep the newer fusion
   * emitters, whose reductions over large tensors run several times
   * faster. Default 16384; 0: every program uses the newer emitters; < 0
   * (an unreadable value): runtime creation fails with a message. */
  int64_t cpu_small_program_elements;
} ttpu_runtime_options;

/* Fills *o from the environment, as the runtime would: each field from
 * its variable, else its default; sets o->initialized. The only place the
 * engine reads the environment at creation. Thread-safe as far as the
 * process's environment is (no setenv meanwhile). The strings it stores
 * are borrowed (the environment's, and a per-thread buffer for the default
 * cache directory): valid until the environment changes or this thread
 * calls it again. */
void ttpu_runtime_options_from_env(ttpu_runtime_options* o);

/* Loads the plugin, checks its ABI version, creates a client.
 * *out is owned by the caller (ttpu_runtime_destroy). */
ttpu_status* ttpu_runtime_create(const ttpu_runtime_options* options,
                                 ttpu_runtime** out);
void ttpu_runtime_destroy(ttpu_runtime* rt);

/* Thread-safe: fixed at creation. */
int ttpu_runtime_device_count(const ttpu_runtime* rt);
/* Borrowed strings, valid for the runtime's lifetime. */
const char* ttpu_runtime_platform_name(const ttpu_runtime* rt);
const char* ttpu_runtime_platform_version(const ttpu_runtime* rt);
const char* ttpu_runtime_plugin_path(const ttpu_runtime* rt);
/* The XLA CPU plugin's device memory is the process heap: a runtime on it
 * keeps freed heap memory for reuse (TORCHTPU_CPU_HEAP, default "keep";
 * docs/guides/environment_variables.md). ttpu_runtime_keeps_host_heap: 1
 * when that is in effect. ttpu_runtime_release_host_heap returns the
 * free heap to the system (torch.tpu.empty_cache); a no-op elsewhere.
 * Thread-safe. */
int ttpu_runtime_keeps_host_heap(const ttpu_runtime* rt);
void ttpu_runtime_release_host_heap(const ttpu_runtime* rt);
/* The identity of the options the runtime compiles with (the disk
 * cache's namespace holds it): borrowed, valid for the runtime's lifetime.
 * Thread-safe: fixed at creation. */
const char* ttpu_runtime_compile_options_id(const ttpu_runtime* rt);
/* Threads that compile strict mode's programs (the compile threads
 * option; 1: on the calling thread). Thread-safe: fixed at creation. */
int ttpu_runtime_compile_threads(const ttpu_runtime* rt);
void ttpu_runtime_plugin_api_version(const ttpu_runtime* rt, int* major,
                                     int* minor);

/* What the loaded plugin can do, probed once when the runtime is created. */
/* Not thread-safe: a plain struct; ttpu_runtime_caps is thread-safe (the
 * capabilities never change). */
typedef struct {
  int serialize_executables;     /* executables serialize (disk cache, AOT) */
  int topology_compile;          /* compiles for a topology without devices */
  int memory_stats;              /* reports device memory figures */
  int cost_analysis;             /* reports a compiled program's cost */
  int cross_process_collectives; /* collectives reach other processes (not
                                    the CPU plugin) */
  int host_code;                 /* programs are compiled to this host's
                                    machine code, devices use host memory
                                    (the CPU plugin) */
  int host_access;               /* the host can work on a storage's memory
                                    in place (ttpu_buffer_host_begin) */
} ttpu_caps;
void ttpu_runtime_caps(const ttpu_runtime* rt, ttpu_caps* out);

/* Waits until all work queued on `device` (-1: all devices) has finished.
 * Returns the first asynchronous error seen since the last synchronize
 * (each such error is returned once), else the first error of the work it
 * waited for. Safe from any thread. */
ttpu_status* ttpu_runtime_synchronize(ttpu_runtime* rt, int device);

/* Why a fused window ended (ttpu_stats.window_ends). */
typedef enum {
  TTPU_END_READ = 0,  /* a host read, copy, upload or wait needed its data */
  TTPU_END_SYNC,      /* synchronize, an explicit flush, a mode change */
  TTPU_END_LIMIT,     /* the window reached its op limit */
  TTPU_END_REPEAT,    /* the repeat detector saw the next step begin */
  TTPU_END_DEVICE,    /* an op on another device */
  TTPU_END_GRAPH,     /* the end of a compiled graph (ttpu_runtime_end_graph) */
  TTPU_END_PASS,      /* an op of another autograd pass (ttpu_op_call's
                         autograd_task): a backward begins or ends */
  TTPU_END_LAYER,     /* the end of one copy of a repeated run of ops */
  TTPU_END_COUNT
} ttpu_window_end;

/* Counters; all monotonic except the *_bytes_in_use / live values. */
typedef struct {
  int64_t compiles;           /* programs compiled */
  double compile_seconds;     /* total compile wall time */
  int64_t cache_hits;         /* in-memory compile cache hits */
  int64_t executions;         /* programs executed */
  int64_t h2d_bytes, d2h_bytes; /* host<->device traffic */
  int64_t bytes_in_use;       /* bytes held by live device buffers */
  int64_t peak_bytes_in_use;
  int64_t live_buffers;
  int64_t disk_hits;          /* programs loaded from the disk cache */
  double disk_load_seconds;
  int64_t disk_writes;        /* programs written to the disk cache */
  int64_t windows;            /* fused windows executed */
  int64_t window_ops;         /* ops they held */
  int64_t window_max_ops;     /* the largest */
  int64_t window_ends[TTPU_END_COUNT];
  int64_t recompiles;         /* compiles of an op already compiled with
                                 another signature */
  int64_t graph_replays;      /* compiled graphs run again without
                                 recording their ops */
  /* The program cache, shared by the runtime's devices (the same figures
   * whatever device is asked for): */
  int64_t programs_loaded;    /* executables loaded now */
  int64_t programs_evicted;   /* unloaded as least recently used */
  int64_t programs_reloaded;  /* evicted ones needed again (from the disk
                                 cache or compiled again) */
  int64_t programs_retired;   /* evicted ones waiting for their last
                                 execution to finish before unloading */
  int64_t programs_shared;    /* signatures that took the executable of a
                                 loaded program of the same text instead of
                                 compiling it (bmm.out after bmm) */
} ttpu_stats;
/* Thread-safe: a copy taken under the lock. */
void ttpu_runtime_stats(ttpu_runtime* rt, int device, ttpu_stats* out);
void ttpu_runtime_reset_peak(ttpu_runtime* rt, int device);

/* Thread-safe (under the lock; a fused window runs first). */
/* Random state of a device: a ui64[2] state on the device, advanced by
 * every random op (XLA's rng_bit_generator, THREE_FRY). */
ttpu_status* ttpu_runtime_manual_seed(ttpu_runtime* rt, int device,
                                      uint64_t seed);
ttpu_status* ttpu_runtime_get_rng_state(ttpu_runtime* rt, int device,
                                        uint64_t state[2]);
ttpu_status* ttpu_runtime_set_rng_state(ttpu_runtime* rt, int device,
                                        const uint64_t state[2]);

/* Why the last compile happened (a new op signature): copied into buf
 * (n bytes, always terminated; may be ""), under the runtime's lock.
 * Returns the reason's full length (like snprintf), 0 when there is none. */
int ttpu_runtime_last_compile_reason(ttpu_runtime* rt, char* buf, size_t n);

/* The in-memory program cache. Every loaded executable costs host memory
 * and, on the CPU plugin, a few memory mappings (the kernel caps a process
 * at vm.max_map_count, 65530 by default): past `n` programs the least
 * recently used are unloaded, and come back from the disk cache (or are
 * compiled again) when needed. Programs a graph replay holds are never
 * unloaded, nor one whose execution may still be running (it goes when
 * that execution is over). n = 0 removes the bound. Takes effect at once.
 * Thread-safe. */
void ttpu_runtime_set_program_cache_size(ttpu_runtime* rt, int64_t n);
int64_t ttpu_runtime_program_cache_size(ttpu_runtime* rt);

/* Testing aid: the next `count` calls of PJRT function `slot` (our ABI
 * header's name, e.g. "loaded_executable_execute", "client_compile",
 * "buffer_to_host_buffer", "event_await"), after `skip` that succeed, fail
 * with a plugin error naming the call, as a failing plugin would; the
 * call is not made (an await is made, then reported failed). slot NULL or
 * count 0 disarms. Process-wide, thread-safe. */
void ttpu_debug_inject_plugin_fault(const char* slot, int skip, int count);

/* ------------------------------------------------------------ modes */


/* Ends any fused window first (its error, if any, is returned and the
 * mode is still changed). */
/* Thread-safe: the mode is the runtime's, not a thread's, read and changed
 * under the lock; graphs (begin/end) nest per runtime, so two threads
 * capturing graphs at once share one capture. */
ttpu_status* ttpu_runtime_set_mode(ttpu_runtime* rt, ttpu_mode mode);
ttpu_mode ttpu_runtime_mode(ttpu_runtime* rt);
/* Runs the recorded fused window now (enqueued, not awaited). */
ttpu_status* ttpu_runtime_flush(ttpu_runtime* rt);
/* The calls between group_begin and group_end are one composite op's
 * (einsum, scaled_dot_product_attention's math form). In strict mode they
 * run as one fused window: the composite compiles and runs one program
 * instead of one per op it decomposes into. In strict and fused mode a
 * fill of a storage the window has not seen is recorded in the window (a
 * composite's own temporary: an attention mask of ones, a scalar), where
 * outside a composite it runs before the window. In debug mode, inside a
 * graph and inside a function body it does nothing. *grouped says whether
 * a group began; pass it to group_end, which in strict mode runs the
 * window (enqueued, not awaited) and goes back to strict mode. A group
 * inside a group runs in the outer one's window. */
ttpu_status* ttpu_runtime_group_begin(ttpu_runtime* rt, int* grouped);
ttpu_status* ttpu_runtime_group_end(ttpu_runtime* rt, int grouped);
/* A whole graph as one program (torch.compile): the ops recorded from
 * begin to end run as one program, whatever the mode, with no op limit and
 * no repeat cuts; `name` labels it in the compile log. end returns the
 * first error of running it; the mode in force before begin is restored. */
ttpu_status* ttpu_runtime_begin_graph(ttpu_runtime* rt, const char* name);
ttpu_status* ttpu_runtime_end_graph(ttpu_runtime* rt);
/* Most ops one fused window holds (default 1000, TORCHTPU_FUSED_MAX_OPS). */
void ttpu_runtime_set_window_limit(ttpu_runtime* rt, int max_ops);

/* ------------------------------------------------------------ diagnostics */

/* One compile, for the compile log. */
typedef struct {
  char what[96];       /* op name, or "fused window (N ops)" */
  char reason[416];    /* why: first compile, or what changed */
  double seconds;      /* compile (or disk load) time */
  int from_disk;       /* loaded from the persistent cache */
  int n_ops;
} ttpu_compile_record;

/* One loaded program (the memory cache), for ttpu_runtime_programs. The
 * byte figures are the plugin's compiled memory stats, -1 where it gives
 * none: device memory the program holds while loaded (code) and needs
 * while it runs (temporaries), and what its arguments and outputs take. */
typedef struct {
  char what[96];       /* op name, "fused window (N ops)", "graph NAME ..." */
  int64_t hits;        /* memory cache hits so far */
  int64_t code_bytes, temp_bytes, argument_bytes, output_bytes;
} ttpu_program_info;

/* Thread-safe. Copies up to max of the loaded programs, most recently
 * used first, into out (may be NULL when max is 0); returns how many are
 * loaded. */
int ttpu_runtime_programs(ttpu_runtime* rt, ttpu_program_info* out, int max);

/* Thread-safe: records are copied out under the lock. */
/* The log keeps the most recent 4096 compiles. */
int ttpu_runtime_compile_log_count(ttpu_runtime* rt);
int ttpu_runtime_compile_log_get(ttpu_runtime* rt, int index,
                                 ttpu_compile_record* out);
void ttpu_runtime_compile_log_clear(ttpu_runtime* rt);
/* A pending warning (one op recompiling again and again), copied into
 * buf and cleared; returns 0 when there is none. */
int ttpu_runtime_take_warning(ttpu_runtime* rt, char* buf, size_t n);

/* ------------------------------------------------------------ disk cache */

/* The persistent compile cache: serialized executables in `dir` (NULL or
 * "" turns it off), shared by processes; at most max_bytes (LRU). The
 * default comes from TORCHTPU_CACHE_DIR (default ~/.cache/torchtpu;
 * TORCHTPU_DISK_CACHE=0 turns it off) and TORCHTPU_CACHE_MAX_MB. */
/* Thread-safe; the string cache_dir returns is valid until the next
 * set_cache_dir, which must not race its use. */
ttpu_status* ttpu_runtime_set_cache_dir(ttpu_runtime* rt, const char* dir,
                                        int64_t max_bytes);
/* The directory in use ("" when off); borrowed until the next set. */
const char* ttpu_runtime_cache_dir(ttpu_runtime* rt);

#ifdef __cplusplus
}
#endif

#endif /* TTPU_RUNTIME_H_ */
