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
