/* env.h - the engine's reads of the environment (internal; base/env.c is
 * the only file that calls getenv). ttpu_runtime_options_from_env reads
 * the switches a runtime fixes at creation; the functions here read the
 * few that are documented as read at each use. */
#ifndef TTPU_BASE_ENV_H_
#define TTPU_BASE_ENV_H_

#include "ttpu.h"

/* TORCHTPU_PLUGIN (ttpu_plugin_find), TORCHTPU_LIBTPU
 * (ttpu_aot_find_compiler), TORCHTPU_DUMP_DIR: the value or NULL, borrowed
 * from the environment. */
const char* ttpu_env_plugin_path(void);
const char* ttpu_env_libtpu_path(void);
const char* ttpu_env_dump_dir(void);
/* TORCHTPU_CHECK_INDICES: 0 when it is "0", else 1. */
int ttpu_env_check_indices(void);

/* TORCHTPU_CPU_HEAP (base/heap.h): 0 when it is "release", or when the
 * environment already tunes glibc's malloc (GLIBC_TUNABLES naming
 * glibc.malloc, MALLOC_TRIM_THRESHOLD_, MALLOC_MMAP_THRESHOLD_,
 * MALLOC_TOP_PAD_): the user's settings stand; else 1. */
int ttpu_env_cpu_heap_keep(void);

/* The error for an invalid value of a switch ttpu_runtime_options_from_env
 * could not take (mode = -1 or program_cache_size = -1): names the
 * variable and its value. */
ttpu_status* ttpu_env_invalid_mode(void);
/* The CPUs this process may run on (sched_getaffinity), else the online
 * ones; at least 1. */
int ttpu_env_usable_cores(void);
ttpu_status* ttpu_env_invalid_cpu_opt_level(void);
ttpu_status* ttpu_env_invalid_cpu_small_program_elements(void);
ttpu_status* ttpu_env_invalid_program_cache_size(void);
/* TORCHTPU_BUCKETS (docs/guides/shapes_and_recompiles.md): "off", "pow2"
 * (the default) or "quarter", optionally ":N" for the smallest bucket
 * (default 128), or explicit sizes in ascending order ("64,128,256", at
 * most TTPU_ENV_MAX_BUCKETS; beyond the last, powers of two). Sets *min
 * (0: off), *ladder (1 powers of two, 2 quarter steps, 3 explicit) and
 * sizes[*n_sizes]; NULL, or the error naming the variable when its value
 * is invalid. */
#define TTPU_ENV_MAX_BUCKETS 16
ttpu_status* ttpu_env_buckets(int64_t* min, int* ladder, int64_t* sizes,
                              int* n_sizes);
/* TORCHTPU_BUCKET_POISON=1: bucketed programs fill the padding they write
 * with NaN (integers: their highest value), so that a consumer that
 * fails to mask it shows (a testing aid). */
int ttpu_env_bucket_poison(void);

#endif /* TTPU_BASE_ENV_H_ */
