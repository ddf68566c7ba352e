/* ttpu_pjrt.h - the engine's thin layer over a PJRT plugin (internal).
 *
 * Wraps the subset of the PJRT C API we use (declared in pjrt_abi.h, our own
 * declaration of that ABI). PJRT errors become ttpu statuses of code
 * TTPU_PLUGIN_ERROR (or RESOURCE_EXHAUSTED for out-of-memory) that keep the
 * plugin's message. Handles are opaque pointers to the plugin's objects.
 */
#ifndef TTPU_PJRT_H_
#define TTPU_PJRT_H_

#include "ttpu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ttpu_pjrt_plugin ttpu_pjrt_plugin;  /* dlopen'ed plugin */
typedef struct ttpu_pjrt_client ttpu_pjrt_client;  /* PJRT client + devices */
typedef struct ttpu_pjrt_buffer ttpu_pjrt_buffer;  /* a PJRT_Buffer */
typedef struct ttpu_pjrt_event ttpu_pjrt_event;    /* a PJRT_Event */
typedef struct ttpu_pjrt_exec ttpu_pjrt_exec;      /* a PJRT_LoadedExecutable */

/* Oldest plugin ABI minor version we accept (major must be 0). */
#define TTPU_PJRT_MIN_MINOR 57

/* Finds the plugin to load: $TORCHTPU_PLUGIN if set; else libtpu when a TPU
 * is present; else the pinned XLA CPU plugin from the Python environment
 * (search_dirs: NULL-terminated list of site-packages dirs to look in, may be
 * NULL). *out is caller-freed (free()). */
ttpu_status* ttpu_plugin_find(const char* const* search_dirs, char** out);

/* dlopens `path`, calls GetPjrtApi, checks struct size and version, and
 * initialises the plugin. Caller frees with ttpu_pjrt_plugin_unload (only at
 * process exit: plugins cannot be reloaded safely). */
ttpu_status* ttpu_pjrt_plugin_load(const char* path, ttpu_pjrt_plugin** out);
void ttpu_pjrt_plugin_unload(ttpu_pjrt_plugin* p);
void ttpu_pjrt_plugin_version(const ttpu_pjrt_plugin* p, int* major,
                              int* minor);
const char* ttpu_pjrt_plugin_path(const ttpu_pjrt_plugin* p);

/* Creates a client. cpu_device_count > 0 passes the "cpu_device_count"
 * create option (ignored by non-CPU plugins). Caller destroys. */
ttpu_status* ttpu_pjrt_client_create(ttpu_pjrt_plugin* p, int cpu_device_count,
                                     ttpu_pjrt_client** out);
void ttpu_pjrt_client_destroy(ttpu_pjrt_client* c);
int ttpu_pjrt_client_device_count(const ttpu_pjrt_client* c);
/* The global id of addressable device `device` (what a device assignment
 * names), or -1 when out of range. */
int ttpu_pjrt_client_device_id(const ttpu_pjrt_client* c, int device);
/* The kind of addressable device `device` ("cpu", "TPU v5 lite", ...),
 * NUL-terminated into buf (truncated to n - 1 bytes). */
ttpu_status* ttpu_pjrt_client_device_kind(const ttpu_pjrt_client* c,
                                          int device, char* buf, size_t n);
/* The plugin allocator's view of a device's memory; -1 for what it does
 * not report. UNIMPLEMENTED when it reports nothing (the CPU plugin). */
typedef struct {
  int64_t bytes_in_use;
  int64_t bytes_limit;
} ttpu_pjrt_device_memory;
ttpu_status* ttpu_pjrt_client_device_memory(const ttpu_pjrt_client* c,
                                            int device,
                                            ttpu_pjrt_device_memory* out);
/* What a plugin can do, probed once when its client is created (the only
 * place the engine looks at the platform's name to decide anything). */
typedef struct {
  int serialize_executables;     /* Executable_Serialize + DeserializeAndLoad */
  int topology_compile;          /* TopologyDescription_Create + PJRT_Compile */
  int memory_stats;              /* Device_MemoryStats */
  int cost_analysis;             /* Executable_GetCostAnalysis */
  int cross_process_collectives; /* collectives reach other processes: not
                                    on the CPU plugin */
  int host_code;                 /* the CPU plugin: programs are this host's
                                    machine code, device memory is host
                                    memory */
  int host_pointers;             /* host_code, and Buffer_UnsafePointer gives
                                    a buffer's host address */
} ttpu_pjrt_caps;
/* Borrowed, valid for the client's lifetime. */
const ttpu_pjrt_caps* ttpu_pjrt_client_caps(const ttpu_pjrt_client* c);
/* The same probe for a plugin loaded without a client (the AOT compiler):
 * platform is the platform's name, NULL when unknown (then host_code and
 * cross_process_collectives say what a non-CPU plugin would). */
void ttpu_pjrt_plugin_caps(const ttpu_pjrt_plugin* p, const char* platform,
                           ttpu_pjrt_caps* out);
/* The identity of the compile options ttpu_pjrt_compile uses by default
 * (portable executables), for cache namespaces. */
const char* ttpu_pjrt_compile_options_id(void);
/* The code generator's optimization level for every program c compiles
 * from now on (XLA's xla_backend_optimization_level, 0-3), or -1 for the
 * plugin's own default. Only the CPU plugin (caps.host_code) takes one;
 * elsewhere it is INVALID_ARGUMENT unless -1. On the CPU plugin it also
 * turns XNNPACK off, whatever the level (compile.c says why). Not
 * thread-safe: call it before the client compiles anything. */
ttpu_status* ttpu_pjrt_client_set_opt_level(ttpu_pjrt_client* c, int level);
/* Programs whose every tensor type holds at most max_elements elements
 * compile, on the CPU plugin, with XLA's older loop emitters (faster to
 * compile, slower to run reductions over large tensors); 0 turns it off.
 * Elsewhere INVALID_ARGUMENT unless 0. Not thread-safe: call it before
 * the client compiles anything, after ttpu_pjrt_client_set_opt_level. */
ttpu_status* ttpu_pjrt_client_set_small_programs(ttpu_pjrt_client* c,
                                                 int64_t max_elements);
/* Elements of the largest `tensor<...>` type in a StableHLO text
 * (INT64_MAX when a dimension is dynamic); 0 when there is none. */
int64_t ttpu_pjrt_largest_tensor(const char* text, size_t len);
/* The identity of c's compile options (ttpu_pjrt_compile_options_id, with
 * the CPU plugin's settings: XNNPACK, level, small programs), for cache namespaces. Borrowed,
 * valid for the client's lifetime. */
const char* ttpu_pjrt_client_options_id(const ttpu_pjrt_client* c);

/* Borrowed, valid for the client's lifetime: "cpu", "tpu", "cuda"... */
const char* ttpu_pjrt_client_platform_name(const ttpu_pjrt_client* c);
const char* ttpu_pjrt_client_platform_version(const ttpu_pjrt_client* c);

/* Host -> device. Copies `data` (row-major, dims) before returning, so the
 * caller may free it at once. *out is caller-destroyed. */
ttpu_status* ttpu_pjrt_buffer_from_host(ttpu_pjrt_client* c, int device,
                                        const void* data, ttpu_dtype dtype,
                                        const int64_t* dims, int ndim,
                                        ttpu_pjrt_buffer** out);
/* Device -> host, whole buffer, row-major; waits for the buffer. */
ttpu_status* ttpu_pjrt_buffer_to_host(ttpu_pjrt_client* c, ttpu_pjrt_buffer* b,
                                      void* dst, size_t nbytes);
/* The same in two halves: start enqueues the copy (ordered after what
 * produces b, and before anything enqueued later that donates or replaces
 * it) and returns its completion event in *done (NULL when nothing is left
 * to wait for); dst must stay valid until the event is finished. b may be
 * destroyed meanwhile: PJRT frees its memory once the copy is over. */
ttpu_status* ttpu_pjrt_buffer_to_host_start(ttpu_pjrt_client* c,
                                            ttpu_pjrt_buffer* b, void* dst,
                                            size_t nbytes,
                                            ttpu_pjrt_event** done);
/* Awaits and destroys e (NULL: nothing to do); `what` labels its error. */
ttpu_status* ttpu_pjrt_event_finish(ttpu_pjrt_client* c, ttpu_pjrt_event* e,
                                    const char* what);
/* Device -> device (may be the same device: a real copy). Caller destroys. */
ttpu_status* ttpu_pjrt_buffer_copy_to_device(ttpu_pjrt_client* c,
                                             ttpu_pjrt_buffer* b, int device,
                                             ttpu_pjrt_buffer** out);
void ttpu_pjrt_buffer_destroy(ttpu_pjrt_client* c, ttpu_pjrt_buffer* b);
/* Blocks until the buffer is ready; returns its error if it failed. */
ttpu_status* ttpu_pjrt_buffer_await(ttpu_pjrt_client* c, ttpu_pjrt_buffer* b);
/* The host address of b's memory (caps.host_pointers only): b must be
 * ready; the address is valid while b is neither destroyed nor donated. */
ttpu_status* ttpu_pjrt_buffer_host_pointer(ttpu_pjrt_client* c,
                                           ttpu_pjrt_buffer* b, void** out);
/* Pinned buffers are never donated: an execution that takes one as an
 * argument copies it instead of reusing its memory, so memory the host
 * works on stays the buffer's. pin/unpin/execute must not race (the
 * runtime calls them under its lock). Pins nest; unpin drops one. */
ttpu_status* ttpu_pjrt_buffer_pin(ttpu_pjrt_client* c, ttpu_pjrt_buffer* b);
void ttpu_pjrt_buffer_unpin(ttpu_pjrt_client* c, ttpu_pjrt_buffer* b);
/* Element type / dims of a buffer (dims: up to TTPU_MAX_DIMS). */
ttpu_status* ttpu_pjrt_buffer_shape(ttpu_pjrt_client* c, ttpu_pjrt_buffer* b,
                                    ttpu_dtype* dtype, int64_t* dims,
                                    int* ndim);

/* Events. */
int ttpu_pjrt_event_is_ready(ttpu_pjrt_client* c, ttpu_pjrt_event* e);
ttpu_status* ttpu_pjrt_event_await(ttpu_pjrt_client* c, ttpu_pjrt_event* e);
void ttpu_pjrt_event_destroy(ttpu_pjrt_client* c, ttpu_pjrt_event* e);
/* Calls fn(arg, failed) once e is ready: on a plugin thread, or before
 * this returns when e already is. e may be destroyed meanwhile. On an
 * error return fn is never called. */
ttpu_status* ttpu_pjrt_event_on_ready(ttpu_pjrt_client* c, ttpu_pjrt_event* e,
                                      void (*fn)(void* arg, int failed),
                                      void* arg);

/* Compiles StableHLO MLIR text with a serialized CompileOptionsProto
 * (NULL/0 = one replica, one partition, portable so it can run on any
 * device). Errors carry the plugin's message. Caller destroys. */
ttpu_status* ttpu_pjrt_compile(ttpu_pjrt_client* c, const char* mlir,
                               size_t mlir_len, const void* options,
                               size_t options_len, ttpu_pjrt_exec** out);
/* An executable may have several holders: retain adds one (returns e),
 * destroy drops one and unloads the executable with the last. Thread-safe. */
ttpu_pjrt_exec* ttpu_pjrt_exec_retain(ttpu_pjrt_exec* e);
/* 1 when e was loaded from serialized bytes (ttpu_pjrt_exec_deserialize). */
int ttpu_pjrt_exec_deserialized(const ttpu_pjrt_exec* e);
void ttpu_pjrt_exec_destroy(ttpu_pjrt_client* c, ttpu_pjrt_exec* e);
int ttpu_pjrt_exec_num_outputs(ttpu_pjrt_client* c, ttpu_pjrt_exec* e);

/* Enqueues one execution on `device`. args are borrowed (not consumed unless
 * the program donates them, in which case they must not be used again; the
 * caller still destroys the handle). outs receives n_outs new buffers
 * (caller destroys). If done is non-NULL it receives an event that fires
 * when the execution completes (caller destroys). */
ttpu_status* ttpu_pjrt_execute(ttpu_pjrt_client* c, ttpu_pjrt_exec* e,
                               int device, ttpu_pjrt_buffer* const* args,
                               int n_args, ttpu_pjrt_buffer** outs, int n_outs,
                               ttpu_pjrt_event** done);

/* Writes v as a protobuf varint at p (at most 10 bytes); returns its
 * length. For the compile-option protos we encode by hand. */
size_t ttpu_pjrt_put_varint(unsigned char* p, uint64_t v);

/* A CompileOptionsProto for one program replicated over n devices (one
 * replica each, replica r on the device of global id device_ids[r]; one
 * partition; not portable). Writes at most cap bytes into buf and returns
 * the length, or 0 when cap is too small. */
size_t ttpu_pjrt_replicated_options(const int* device_ids, int n,
                                    unsigned char* buf, size_t cap);

/* Enqueues one execution of a replicated program (compiled with
 * ttpu_pjrt_replicated_options) on all its n_devices replicas at once, as
 * its cross-replica collectives require. args is [n_devices][n_args]
 * (replica-major, each replica's arguments on its device), outs receives
 * [n_devices][n_outs] new buffers, done (may be NULL) one completion event
 * per replica. Ownership as in ttpu_pjrt_execute. */
ttpu_status* ttpu_pjrt_execute_replicated(ttpu_pjrt_client* c,
                                          ttpu_pjrt_exec* e, int n_devices,
                                          ttpu_pjrt_buffer* const* args,
                                          int n_args, ttpu_pjrt_buffer** outs,
                                          int n_outs, ttpu_pjrt_event** done);

/* Serializes an executable; *out is malloc'ed (caller frees). */
ttpu_status* ttpu_pjrt_exec_serialize(ttpu_pjrt_client* c, ttpu_pjrt_exec* e,
                                      void** out, size_t* out_len);
/* Loads a serialized executable. Caller destroys. */
ttpu_status* ttpu_pjrt_exec_deserialize(ttpu_pjrt_client* c, const void* data,
                                        size_t len, ttpu_pjrt_exec** out);

/* Compiled memory stats when the plugin offers them (else UNIMPLEMENTED). */
typedef struct {
  int64_t argument_bytes, output_bytes, alias_bytes, temp_bytes,
      generated_code_bytes;
  int64_t peak_bytes; /* 0 where the plugin does not report it */
} ttpu_pjrt_memory_stats;
ttpu_status* ttpu_pjrt_exec_memory_stats(ttpu_pjrt_client* c, ttpu_pjrt_exec* e,
                                         ttpu_pjrt_memory_stats* out);

/* ------------------------------------- ahead-of-time: compile for a topology
 * A plugin that offers PJRT_Compile (libtpu) compiles for a named set of
 * chips, e.g. "v5e:2x2", without those chips being present. The executable
 * is not loaded anywhere: it can be measured (memory, cost), not run. */
typedef struct ttpu_pjrt_topology ttpu_pjrt_topology;
typedef struct ttpu_pjrt_executable ttpu_pjrt_executable; /* not loaded */

/* Creates the topology `name` (plugin-specific syntax). The plugin must
 * outlive it. Caller destroys. */
ttpu_status* ttpu_pjrt_topology_create(ttpu_pjrt_plugin* p, const char* name,
                                       ttpu_pjrt_topology** out);
void ttpu_pjrt_topology_destroy(ttpu_pjrt_topology* t);
/* Borrowed, valid for the topology's lifetime ("" where not reported). */
const char* ttpu_pjrt_topology_name(const ttpu_pjrt_topology* t);
const char* ttpu_pjrt_topology_platform_name(const ttpu_pjrt_topology* t);
const char* ttpu_pjrt_topology_platform_version(const ttpu_pjrt_topology* t);
/* Kind of the first device, e.g. "TPU v5 lite". */
const char* ttpu_pjrt_topology_device_kind(const ttpu_pjrt_topology* t);
int ttpu_pjrt_topology_device_count(const ttpu_pjrt_topology* t);

/* Compiles StableHLO MLIR text for the topology with a serialized
 * CompileOptionsProto (required: the replica/partition counts decide how
 * many of the topology's devices the program spans). Caller destroys. */
ttpu_status* ttpu_pjrt_topology_compile(ttpu_pjrt_topology* t,
                                        const char* mlir, size_t mlir_len,
                                        const void* options,
                                        size_t options_len,
                                        ttpu_pjrt_executable** out);
void ttpu_pjrt_executable_destroy(ttpu_pjrt_topology* t,
                                  ttpu_pjrt_executable* e);
/* PJRT_Executable_Serialize of a topology-compiled executable: what a
 * client of that platform loads with ttpu_pjrt_exec_deserialize. *out is
 * caller-freed (free()). */
ttpu_status* ttpu_pjrt_executable_serialize(ttpu_pjrt_topology* t,
                                            ttpu_pjrt_executable* e,
                                            void** out, size_t* out_len);
/* Per-device compiled memory stats (UNIMPLEMENTED where not offered). */
ttpu_status* ttpu_pjrt_executable_memory_stats(ttpu_pjrt_topology* t,
                                               ttpu_pjrt_executable* e,
                                               ttpu_pjrt_memory_stats* out);
/* Calls fn once per numeric property of the plugin's cost analysis
 * ("flops", "bytes accessed", ...); name is not NUL-terminated. */
typedef void (*ttpu_pjrt_cost_fn)(void* user, const char* name,
                                  size_t name_len, double value);
ttpu_status* ttpu_pjrt_executable_cost_analysis(ttpu_pjrt_topology* t,
                                                ttpu_pjrt_executable* e,
                                                ttpu_pjrt_cost_fn fn,
                                                void* user);

#ifdef __cplusplus
}
#endif

#endif /* TTPU_PJRT_H_ */
