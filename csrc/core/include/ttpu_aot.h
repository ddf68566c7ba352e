/* ttpu_aot.h - ahead-of-time compilation for TPU topologies (public C API).
 *
 * Compiles the engine's StableHLO programs for real TPU chips on a host that
 * has none: libtpu (PyPI `libtpu`) is loaded as a second PJRT plugin beside
 * the execution plugin, a topology such as "v5e:2x2" is described to it,
 * and PJRT_Compile builds the TPU executable. Nothing runs; what comes back
 * is whether the program compiles and what it needs per device: HBM
 * (arguments, outputs, temporaries, peak) and the compiler's cost analysis.
 *
 * Conventions are those of ttpu.h: a NULL status is success, outputs go
 * through pointers, ownership is stated per function.
 */
#ifndef TTPU_AOT_H_
#define TTPU_AOT_H_

#include <stddef.h>
#include <stdint.h>

#include "ttpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Thread-safety: find, load, unload, target_create and target_destroy are
 * not thread-safe (load once per process; destroy an object only once no
 * other call uses it). The accessors and ttpu_aot_compile are thread-safe
 * on a live target (the plugin's compile is). */
typedef struct ttpu_aot_compiler ttpu_aot_compiler; /* loaded libtpu */
typedef struct ttpu_aot_target ttpu_aot_target;     /* one topology */

/* What one compiled program needs on each device of the target. */
typedef struct {
  /* Compiled memory stats, bytes per device (padded to TPU tiles). */
  int64_t argument_bytes, output_bytes, alias_bytes, temp_bytes,
      generated_code_bytes, peak_bytes;
  /* Cost analysis per device; -1 where the compiler reports none. */
  double flops, transcendentals, bytes_accessed, optimal_seconds;
} ttpu_aot_stats;

/* Finds libtpu: $TORCHTPU_LIBTPU if set (must name a file), else
 * <dir>/libtpu/libtpu.so for the first dir of search_dirs (NULL-terminated,
 * may be NULL) that has it. NOT_FOUND says how to install it. *out is
 * caller-freed (free()). */
ttpu_status* ttpu_aot_find_compiler(const char* const* search_dirs,
                                    char** out);

/* Loads the compiler plugin at `path` and initialises it. On a host with no
 * TPU it first sets, where unset, the environment libtpu needs to start
 * without one (no metadata-server queries, a one-host local worker, no
 * single-process lock). A plugin cannot be reloaded safely: load once per
 * process, unload at exit. */
ttpu_status* ttpu_aot_compiler_load(const char* path, ttpu_aot_compiler** out);
void ttpu_aot_compiler_unload(ttpu_aot_compiler* c);
const char* ttpu_aot_compiler_path(const ttpu_aot_compiler* c); /* borrowed */

/* Describes topology `name` to the compiler: "<generation>:<chips>", e.g.
 * "v5e:2x2", "v6e:2x4", "v4:2x2x1", "v5p:2x2x1". The compiler must outlive
 * the target. Caller destroys. */
ttpu_status* ttpu_aot_target_create(ttpu_aot_compiler* c, const char* name,
                                    ttpu_aot_target** out);
void ttpu_aot_target_destroy(ttpu_aot_target* t);
/* Borrowed strings, valid for the target's lifetime. */
const char* ttpu_aot_target_name(const ttpu_aot_target* t);
const char* ttpu_aot_target_device_kind(const ttpu_aot_target* t);
const char* ttpu_aot_target_platform_version(const ttpu_aot_target* t);
int ttpu_aot_target_device_count(const ttpu_aot_target* t);

/* Compiles StableHLO MLIR text for the target, spanning num_replicas x
 * num_partitions of its devices (0 means 1; their product may not exceed
 * the device count), and fills *out (may be NULL). A program that does not
 * fit in a device's HBM fails with RESOURCE_EXHAUSTED and the compiler's
 * account of it. */
ttpu_status* ttpu_aot_compile(ttpu_aot_target* t, const char* mlir,
                              size_t mlir_len, int num_replicas,
                              int num_partitions, ttpu_aot_stats* out);


/* ------------------------------------------- filling a TPU compile cache
 * A run on the execution plugin (the CPU plugin, say) shows every program a
 * script compiles; the same text compiled for a topology with libtpu and
 * written under the disk-cache namespace a libtpu client of that chip looks
 * up, with the same key, makes the first run on the TPU host load instead
 * of compile (TORCHTPU_CACHE_DIR). Needs this same engine build there: the
 * namespace includes it. */

/* Sees each program rt lowers that the disk cache would keep (not the
 * device-bound collectives): its label, signature key, StableHLO text,
 * result plans (results_len opaque bytes for n_results) and compile
 * options (NULL: the runtime's default, one replica and one partition).
 * Everything is borrowed for the call. It runs under the runtime's lock,
 * on the thread that compiles; it must not call into the runtime. */
typedef void (*ttpu_aot_program_sink)(void* user, const char* what,
                                      const int64_t* key, size_t n_key,
                                      const char* text, size_t text_len,
                                      const void* results, size_t results_len,
                                      int n_results, const void* options,
                                      size_t options_len);
/* Installs fn (NULL removes it) on rt; user is borrowed until removed.
 * Thread-safe (takes the runtime's lock). Programs found in rt's memory or
 * disk cache are not lowered, so not seen: turn rt's disk cache off first
 * to see every program. */
ttpu_status* ttpu_aot_set_program_sink(ttpu_runtime* rt,
                                       ttpu_aot_program_sink fn, void* user);
/* Runs what rt holds back, then unloads every program of its memory cache
 * that nothing pins (a captured graph's program stays), so that a sink
 * installed next sees every program a step runs, including those earlier
 * work compiled: each is lowered again (or loaded from the disk cache,
 * when it is on). Thread-safe. */
ttpu_status* ttpu_aot_unload_programs(ttpu_runtime* rt);

/* JAX callees for another platform. A program captured on one platform
 * calls each JAX function (ttpu_extern_define) as lowered for it; before
 * it is compiled for another platform ("tpu": Pallas kernels become Mosaic
 * kernels), ttpu_aot_define_callee takes the callee's text lowered for
 * that platform (its block, starting "// torchtpu.jax_op NAME" and ending
 * "// end NAME", as ttpu_extern_define's), and ttpu_aot_retarget returns
 * the program's text with each callee's block replaced by its text for
 * the platform (a callee without one is kept as it is). *out is malloc'ed
 * (caller frees). Thread-safe; definitions last for the process, and a
 * second one of the same callee and platform must be the same text. */
ttpu_status* ttpu_aot_define_callee(const char* platform, const char* callee,
                                    const char* text);
ttpu_status* ttpu_aot_retarget(const char* text, size_t len,
                               const char* platform, char** out,
                               size_t* out_len);

/* A cache directory being filled for one target. Not thread-safe: one
 * caller at a time. Owns nothing of the target's: the target (and its
 * compiler) must outlive it. */
typedef struct ttpu_aot_cache ttpu_aot_cache;

/* Opens (creating) the disk cache under root with the namespace a libtpu
 * client for target t's chips computes: t's platform name and version,
 * compiler c's PJRT API version, the engine's compile options identity,
 * no host code. Caller closes. */
ttpu_status* ttpu_aot_cache_open(ttpu_aot_compiler* c, ttpu_aot_target* t,
                                 const char* root, ttpu_aot_cache** out);
void ttpu_aot_cache_close(ttpu_aot_cache* cache);
/* The namespace directory's name (16 hex digits), borrowed. */
const char* ttpu_aot_cache_namespace(const ttpu_aot_cache* cache);

/* What ttpu_aot_cache_fill did. */
typedef enum {
  TTPU_AOT_FILL_COMPILED = 0, /* compiled for the target and written */
  TTPU_AOT_FILL_CACHED = 1,   /* a valid entry was there already */
} ttpu_aot_fill_outcome;

/* Makes sure the cache holds key's program: compiles mlir for the target
 * with `options` (a serialized CompileOptionsProto; NULL: one replica, one
 * partition, what the runtime uses for a single-device program), serializes
 * the executable and writes it with the result plans (as handed to the
 * sink). *bytes: the bytes written (0 when cached). */
ttpu_status* ttpu_aot_cache_fill(ttpu_aot_cache* cache, const int64_t* key,
                                 size_t n_key, const char* mlir,
                                 size_t mlir_len, const void* results,
                                 size_t results_len, int n_results,
                                 const void* options, size_t options_len,
                                 ttpu_aot_fill_outcome* outcome,
                                 int64_t* bytes);

/* The disk cache's namespace id (16 hex digits and a NUL into out) for a
 * plugin reporting these, computed by the function the runtime uses for its
 * own client; options_id NULL means this engine's (ttpu_aot_options_id). */
void ttpu_aot_namespace_id(const char* platform_name,
                           const char* platform_version, int api_major,
                           int api_minor, const char* options_id,
                           int host_code, char out[17]);
/* The identity of the compile options this engine compiles with, borrowed. */
const char* ttpu_aot_options_id(void);
/* What a libtpu client for the target reports as its platform name
 * (borrowed), and the compiler plugin's PJRT API version. */
const char* ttpu_aot_target_platform_name(const ttpu_aot_target* t);
void ttpu_aot_compiler_api_version(const ttpu_aot_compiler* c, int* major,
                                   int* minor);

/* One disk-cache entry file, read and checked with the disk cache's own
 * reader (whole, checksum, lengths) but not loaded. */
typedef struct {
  char ns[17];   /* namespace id it was written under */
  int64_t* key;  /* malloc'ed: ttpu_aot_entry_free */
  size_t n_key;
  int n_results;
  size_t exe_len;
} ttpu_aot_entry;
/* 1 and *out filled for a valid entry file, 0 otherwise. */
int ttpu_aot_read_entry(const char* path, ttpu_aot_entry* out);
void ttpu_aot_entry_free(ttpu_aot_entry* e);
/* Compiles n programs (texts[k], lens[k] bytes each) for the target as
 * ttpu_aot_compile does, on `threads` compile threads at once (<= 1: one
 * after another on the calling thread; more than n: n). Per program:
 * stats_out[k] (stats_out may be NULL), status_out[k] (NULL on success,
 * else the caller frees it) and seconds_out[k] (may be NULL), the wall
 * time its compile took on its thread. Returns an error only for bad
 * arguments or running out of memory (programs not started then have a
 * NULL status and no stats). Thread-safe as ttpu_aot_compile is; the
 * threads are started and joined inside the call. */
ttpu_status* ttpu_aot_compile_many(ttpu_aot_target* t, int n,
                                   const char* const* texts,
                                   const size_t* lens, int num_replicas,
                                   int num_partitions, int threads,
                                   ttpu_aot_stats* stats_out,
                                   ttpu_status** status_out,
                                   double* seconds_out);

#ifdef __cplusplus
}
#endif

#endif /* TTPU_AOT_H_ */
