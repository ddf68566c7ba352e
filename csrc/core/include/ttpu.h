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

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TTPU_MAX_DIMS 12

/* ------------------------------------------------------------------ status */

typedef enum {
  TTPU_OK = 0,
  TTPU_INVALID_ARGUMENT = 1,  /* bad input: maps to ValueError/RuntimeError */
  TTPU_NOT_FOUND = 2,         /* missing plugin, missing file */
  TTPU_UNIMPLEMENTED = 3,     /* op or dtype the engine cannot lower */
  TTPU_RESOURCE_EXHAUSTED = 4,/* out of device memory */
  TTPU_FAILED_PRECONDITION = 5, /* plugin too old, engine not initialised */
  TTPU_INTERNAL = 6,          /* a bug in the engine */
  TTPU_PLUGIN_ERROR = 7,      /* an error reported by the PJRT plugin */
  TTPU_INDEX_ERROR = 8,       /* out-of-range index: maps to IndexError */
} ttpu_code;

typedef struct ttpu_status ttpu_status;

/* Makes a status with a printf-style message. Caller frees. */
ttpu_status* ttpu_status_make(ttpu_code code, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prepends "context: " to the message of s (s may be NULL: returns NULL). */
ttpu_status* ttpu_status_annotate(ttpu_status* s, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
ttpu_code ttpu_status_code(const ttpu_status* s);
/* Borrowed; valid until the status is freed. */
const char* ttpu_status_message(const ttpu_status* s);
void ttpu_status_free(ttpu_status* s);

/* ------------------------------------------------------------------ dtypes */

typedef enum {
  TTPU_BOOL = 0,
  TTPU_U8,
  TTPU_I8,
  TTPU_I16,
  TTPU_I32,
  TTPU_I64,
  TTPU_F16,
  TTPU_BF16,
  TTPU_F32,
  TTPU_F64,
  TTPU_U16,   /* the unsigned wide types exist for the engine's own use */
  TTPU_U32,   /* (random bits, bit casts) */
  TTPU_U64,
  /* Complex: a storage holds them as PyTorch lays them out, interleaved
   * (re, im) pairs, and the engine keeps that storage physically as the
   * real component type with twice the elements; programs see complex
   * values (ops/lower.c turns pairs into complex values and back). */
  TTPU_C64,
  TTPU_C128,
  TTPU_DTYPE_COUNT,
  TTPU_DTYPE_NONE = -1,
} ttpu_dtype;

size_t ttpu_dtype_size(ttpu_dtype t);
/* MLIR element type spelling: "i1", "ui8", "f32", ... (static string). */
const char* ttpu_dtype_mlir(ttpu_dtype t);
/* Readable name: "bool", "uint8", "float32", ... (static string). */
const char* ttpu_dtype_name(ttpu_dtype t);
/* PyTorch's (c10 ScalarType) name, as its error messages spell it:
 * "Bool", "Byte", "Long", "Float", ... (static string). */
const char* ttpu_dtype_torch_title(ttpu_dtype t);
int ttpu_dtype_is_float(ttpu_dtype t);
int ttpu_dtype_is_int(ttpu_dtype t);   /* signed or unsigned integer, not bool */
/* complex64 / complex128 (not counted as float by ttpu_dtype_is_float). */
int ttpu_dtype_is_complex(ttpu_dtype t);
/* The component type of a complex dtype (F32 for C64, F64 for C128); any
 * other dtype is its own. */
ttpu_dtype ttpu_dtype_real(ttpu_dtype t);
/* The complex dtype with component t (C64 for F32, C128 for F64), or
 * TTPU_DTYPE_NONE. */
ttpu_dtype ttpu_dtype_complex_of(ttpu_dtype t);

/* ------------------------------------------------------------------ runtime */

/* The one registry object: plugin, client, devices, compile cache, stats. */
typedef struct ttpu_runtime ttpu_runtime;

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
} ttpu_runtime_options;

/* Loads the plugin, checks its ABI version, creates a client.
 * *out is owned by the caller (ttpu_runtime_destroy). */
ttpu_status* ttpu_runtime_create(const ttpu_runtime_options* options,
                                 ttpu_runtime** out);
void ttpu_runtime_destroy(ttpu_runtime* rt);

int ttpu_runtime_device_count(const ttpu_runtime* rt);
/* Borrowed strings, valid for the runtime's lifetime. */
const char* ttpu_runtime_platform_name(const ttpu_runtime* rt);
const char* ttpu_runtime_platform_version(const ttpu_runtime* rt);
const char* ttpu_runtime_plugin_path(const ttpu_runtime* rt);
void ttpu_runtime_plugin_api_version(const ttpu_runtime* rt, int* major,
                                     int* minor);

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
} ttpu_stats;
void ttpu_runtime_stats(ttpu_runtime* rt, int device, ttpu_stats* out);
void ttpu_runtime_reset_peak(ttpu_runtime* rt, int device);

/* Random state of a device: a ui64[2] state on the device, advanced by
 * every random op (XLA's rng_bit_generator, THREE_FRY). */
ttpu_status* ttpu_runtime_manual_seed(ttpu_runtime* rt, int device,
                                      uint64_t seed);
ttpu_status* ttpu_runtime_get_rng_state(ttpu_runtime* rt, int device,
                                        uint64_t state[2]);
ttpu_status* ttpu_runtime_set_rng_state(ttpu_runtime* rt, int device,
                                        const uint64_t state[2]);

/* Why the last compile happened (a new op signature), borrowed, may be "". */
const char* ttpu_runtime_last_compile_reason(ttpu_runtime* rt);

/* The in-memory program cache. Every loaded executable costs host memory
 * and, on the CPU plugin, a few memory mappings (the kernel caps a process
 * at vm.max_map_count, 65530 by default): past `n` programs the least
 * recently used are unloaded, and come back from the disk cache (or are
 * compiled again) when needed. Programs a graph replay holds are never
 * unloaded, nor one whose execution may still be running (it goes when
 * that execution is over). n = 0 removes the bound. Takes effect at once. */
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

/* Ends any fused window first (its error, if any, is returned and the
 * mode is still changed). */
ttpu_status* ttpu_runtime_set_mode(ttpu_runtime* rt, ttpu_mode mode);
ttpu_mode ttpu_runtime_mode(ttpu_runtime* rt);
/* Runs the recorded fused window now (enqueued, not awaited). */
ttpu_status* ttpu_runtime_flush(ttpu_runtime* rt);
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
ttpu_status* ttpu_runtime_set_cache_dir(ttpu_runtime* rt, const char* dir,
                                        int64_t max_bytes);
/* The directory in use ("" when off); borrowed until the next set. */
const char* ttpu_runtime_cache_dir(ttpu_runtime* rt);

/* ------------------------------------------------------------------ buffers */

/* A device storage: a flat array of nbytes bytes on one device. Backed by a
 * PJRT buffer once written; may be pending (produced by queued work). The
 * PJRT buffer is replaced, not mutated, by in-place writes, so every view of
 * the storage sees the new version. Ref-counted. */
typedef struct ttpu_buffer ttpu_buffer;

/* Creates an unwritten storage (reads as zeros). Refcount 1. */
ttpu_status* ttpu_buffer_create(ttpu_runtime* rt, int device, size_t nbytes,
                                ttpu_buffer** out);
void ttpu_buffer_retain(ttpu_buffer* b);
void ttpu_buffer_release(ttpu_buffer* b);
size_t ttpu_buffer_nbytes(const ttpu_buffer* b);
int ttpu_buffer_device(const ttpu_buffer* b);

/* Replaces the whole storage with host data of `dtype` laid out row-major
 * as `dims` (product * dtype size must equal nbytes). `data` is borrowed
 * and may be freed once this returns. */
ttpu_status* ttpu_buffer_upload(ttpu_buffer* b, const void* data,
                                ttpu_dtype dtype, const int64_t* dims,
                                int ndim);
/* Copies the whole storage (its nbytes, in storage order) to host `dst`.
 * Waits for pending work. */
ttpu_status* ttpu_buffer_download(ttpu_buffer* b, void* dst, size_t nbytes);
/* Makes dst's content a copy of src's (same nbytes; may cross devices). */
ttpu_status* ttpu_buffer_copy(ttpu_buffer* dst, ttpu_buffer* src);
/* Waits until the storage's current version is computed. */
ttpu_status* ttpu_buffer_wait(ttpu_buffer* b);

/* Graph replay. A graph that ran as exactly one program can run again from
 * other storages without recording its ops: the caller maps each storage
 * the program needs to its own (an input or a new output storage) and
 * passes them in the same order. */
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

/* ------------------------------------------- events, devices and memory */

/* An event marks a point in a device's work (PyTorch's Event). It
 * completes once every program enqueued on its device before it was
 * recorded has finished, and never before an event recorded earlier on the
 * same device. The plugin tells it when that work is done, so asking
 * whether it has completed neither waits nor takes the runtime's lock.
 * Once ttpu_runtime_synchronize returns, the events recorded on the
 * devices it waited for have completed. Ref-counted; usable from any
 * thread. */
typedef struct ttpu_event ttpu_event;

/* Records a new event on `device`; a fused window's recorded ops are
 * enqueued first (they are work before the event). *out: refcount 1. */
ttpu_status* ttpu_event_record(ttpu_runtime* rt, int device, ttpu_event** out);
void ttpu_event_retain(ttpu_event* ev);
void ttpu_event_release(ttpu_event* ev);
int ttpu_event_device(const ttpu_event* ev);
/* *done = 1 once the event has completed; never waits. */
ttpu_status* ttpu_event_query(ttpu_event* ev, int* done);
/* Waits until the event has completed. Returns an error when a program
 * it waited for failed (the program's own error is reported by
 * ttpu_runtime_synchronize). */
ttpu_status* ttpu_event_wait(ttpu_event* ev);
/* Milliseconds from start's completion to end's (negative when end
 * completed first). Both must have completed (else FAILED_PRECONDITION). */
ttpu_status* ttpu_event_elapsed_ms(ttpu_event* start, ttpu_event* end,
                                   double* ms);

/* *idle = 1 when every program enqueued on `device` has finished (a fused
 * window's ops are enqueued first); never waits for the device. */
ttpu_status* ttpu_runtime_query(ttpu_runtime* rt, int device, int* idle);

/* What the plugin says about a device. */
typedef struct {
  char kind[128];       /* the device's kind: "cpu", "TPU v5 lite", ... */
  int id;               /* its global id */
  int64_t bytes_limit;  /* memory its programs may use; -1: not reported */
  int64_t bytes_in_use; /* the plugin's own count in use; -1: not reported */
} ttpu_device_info;
ttpu_status* ttpu_runtime_device_info(ttpu_runtime* rt, int device,
                                      ttpu_device_info* out);
/* Free and total bytes of a device's memory: the plugin's limit and use
 * where it reports them; on the CPU plugin, whose devices' memory is the
 * host's, the host's available and total memory. UNIMPLEMENTED otherwise. */
ttpu_status* ttpu_runtime_memory_info(ttpu_runtime* rt, int device,
                                      int64_t* free_bytes,
                                      int64_t* total_bytes);

/* Storage memory of a device, as the engine allocates it: one device
 * buffer per storage, nothing cached, so every allocation is one device
 * allocation. */
typedef struct {
  int64_t bytes_in_use, peak_bytes_in_use;     /* live storages' bytes */
  int64_t buffers_in_use, peak_buffers_in_use; /* live storages */
  /* Since the runtime started or ttpu_runtime_reset_accumulated: */
  int64_t allocations, frees;
  int64_t allocated_bytes, freed_bytes;
} ttpu_memory_stats;
/* device -1: the sum over devices. */
void ttpu_runtime_memory_stats(ttpu_runtime* rt, int device,
                               ttpu_memory_stats* out);
/* Zeroes the accumulated counts (ttpu_runtime_reset_peak resets the
 * peaks, of bytes and of storages). device -1: every device. */
void ttpu_runtime_reset_accumulated(ttpu_runtime* rt, int device);

/* ------------------------------------------------------------------ op calls */

/* A strided view of a storage: exactly PyTorch's tensor geometry. Sizes,
 * strides and offset are in elements of `dtype`. Borrowed. */
typedef struct {
  ttpu_buffer* buffer;
  ttpu_dtype dtype;
  int ndim;
  const int64_t* sizes;
  const int64_t* strides;
  int64_t offset;
} ttpu_tensor;

typedef enum {
  TTPU_ARG_NONE = 0,   /* None / undefined tensor */
  TTPU_ARG_TENSOR,     /* tensors[tensor] */
  TTPU_ARG_TENSORS,    /* tensors[tensor .. tensor+n); a None entry in an
                          optional-tensor list has buffer == NULL */
  TTPU_ARG_INT,        /* i: compile-time int (dims, sizes, enums) */
  TTPU_ARG_BOOL,       /* i: 0/1, compile-time */
  TTPU_ARG_FLOAT,      /* f: compile-time float (eps, p, momentum) */
  TTPU_ARG_SCALAR,     /* a runtime Scalar (alpha, other, value): passed to
                          the program as data, so a new value never
                          recompiles. f holds it, or i when scalar_dtype is
                          integral/bool. scalar_dtype is its PyTorch type
                          (I64/F64/BOOL for Python numbers, C128 for a
                          Python complex, the tensor's dtype for a 0-d CPU
                          tensor). A complex Scalar has f (real part)
                          and fi (imaginary part). */
  TTPU_ARG_INTS,       /* ints[0..n) */
  TTPU_ARG_FLOATS,     /* floats[0..n) */
  TTPU_ARG_SCALARS,    /* runtime Scalar list: floats[0..n) (exact for
                          ints up to 2^53), scalar_dtype gives the kind */
  TTPU_ARG_STR,        /* str */
} ttpu_arg_kind;

typedef struct {
  ttpu_arg_kind kind;
  int64_t i;
  double f;
  ttpu_dtype scalar_dtype;
  int n;
  const int64_t* ints;
  const double* floats;
  int tensor;
  const char* str;
  double fi;           /* imaginary part of a complex SCALAR */
} ttpu_arg;

/* One ATen call, packed by the PyTorch glue. `op` is the id of an ATen
 * overload ("add.Tensor") from ttpu_op_lookup. args follow the ATen schema
 * in order. outputs are where results go, in this order: one per schema
 * return (a fresh tensor, or the aliased `self`/`out` argument of in-place
 * and out= overloads, possibly a view), then every other mutable argument
 * (Tensor(a!)) that no return aliases, in schema order (e.g. the running
 * statistics of batch norm). */
typedef struct {
  int op;
  int n_args;
  const ttpu_arg* args;
  int n_tensors;
  const ttpu_tensor* tensors;
  int n_outputs;
  const ttpu_tensor* outputs;
  /* PyTorch's result_type over the tensor and Scalar args (promotion as
   * on CPU), or TTPU_DTYPE_NONE when the glue did not compute it. */
  ttpu_dtype common_dtype;
  int device;
  /* torch.set_float32_matmul_precision for float32 contractions (matmul
   * family, convolution): 0 "highest" (full fp32: XLA HIGHEST; the value
   * of a zero-initialized call), 1 "high" (XLA HIGH: three bf16 passes),
   * 2 "medium" (XLA DEFAULT: one bf16 pass on a TPU). The numbering is
   * at::Float32MatmulPrecision's. Part of the program signature. */
  int matmul_precision;
} ttpu_op_call;

/* Id of an ATen overload name ("add.Tensor", "relu.default" is "relu"),
 * or -1 if the engine has no lowering for it. */
int ttpu_op_lookup(const char* name);
/* Name of op id; static string. */
const char* ttpu_op_name(int op);
/* Number of ops in the lowering table; ids are 0..count-1. */
int ttpu_op_count(void);

/* Runs one op: lowers (or finds in the cache), compiles, enqueues. Output
 * storages get their new versions immediately (pending until the program
 * finishes). Inputs are borrowed. */
ttpu_status* ttpu_op_run(ttpu_runtime* rt, const ttpu_op_call* call);

/* ------------------------------------------------------------ tracing */

/* A trace hook lets a profiler see what the engine does on the host and
 * on the devices: compiles, and every program launch with the times it
 * was enqueued and finished on its device. Nothing is reported, timed or
 * allocated while no hook is installed. */

typedef enum {
  /* A program is about to be compiled, or loaded from the persistent
   * cache, for a miss of the in-memory cache. */
  TTPU_TRACE_COMPILE_BEGIN = 0,
  /* The compile (or load) that the last BEGIN on this thread announced is
   * over; from_disk and failed say how. */
  TTPU_TRACE_COMPILE_END = 1,
  /* A program was enqueued on `device`; time_ns is when its launch began. */
  TTPU_TRACE_LAUNCH = 2,
  /* The program of LAUNCH number `launch` finished on its device (failed:
   * with an error, or it could not be timed); time_ns is when. */
  TTPU_TRACE_DONE = 3,
} ttpu_trace_kind;

typedef struct {
  ttpu_trace_kind kind;
  int device;
  /* COMPILE_*, LAUNCH: the program (an op name, "fused window (N ops)",
   * "graph NAME (N ops)", a collective); borrowed for the call. NULL for
   * DONE. */
  const char* what;
  int n_ops;          /* COMPILE_*, LAUNCH: the ops the program runs */
  int from_disk;      /* COMPILE_END: loaded from the persistent cache */
  int failed;         /* COMPILE_END, DONE */
  uint64_t launch;    /* LAUNCH, DONE: numbers launches from 1, per runtime */
  int64_t time_ns;    /* LAUNCH, DONE: CLOCK_MONOTONIC nanoseconds */
} ttpu_trace_event;

/* Returns, from COMPILE_END and LAUNCH, the TTPU_TRACE_* bits to report
 * from then on (0 removes the hook): a hook may end itself from where it
 * cannot call the engine. Other kinds' return values are ignored. */
typedef unsigned (*ttpu_trace_fn)(void* user, const ttpu_trace_event* event);

#define TTPU_TRACE_COMPILES 1u /* report COMPILE_BEGIN / COMPILE_END */
#define TTPU_TRACE_LAUNCHES 2u /* report LAUNCH / DONE (times every launch) */

/* Installs fn with `user` for the events in `what` (TTPU_TRACE_* bits);
 * fn NULL or what 0 removes the hook. COMPILE_* and LAUNCH come on the
 * thread making the call, with the runtime's lock held: fn must not call
 * into the engine, and must not throw. DONE comes once for every LAUNCH,
 * after it, on a plugin thread (or on the launching thread when the
 * program finished at once), without the lock; it reaches the fn and
 * user in force at the LAUNCH even after the hook was changed, so both
 * must outlive every launch made while they were installed. A
 * COMPILE_BEGIN is always followed by its COMPILE_END. */
ttpu_status* ttpu_runtime_set_trace_hook(ttpu_runtime* rt, ttpu_trace_fn fn,
                                         void* user, unsigned what);

#ifdef __cplusplus
}
#endif

#endif /* TTPU_H_ */
