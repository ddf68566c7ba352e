/* env.c - every read of the environment the engine makes. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"

#define DEFAULT_PROGRAM_CACHE 1024
#define DEFAULT_RECOMPILE_WARN 8

static const char* nonempty(const char* name) {
  const char* v = getenv(name);
  return v && *v ? v : NULL;
}

static int64_t program_cache_size(void) {
  const char* env = getenv("TORCHTPU_PROGRAM_CACHE_SIZE");
  if (!env || !*env) return DEFAULT_PROGRAM_CACHE;
  char* end = NULL;
  long long n = strtoll(env, &end, 10);
  return end != env && *end == 0 && n >= 0 ? n : -1;
}

static ttpu_mode eager_mode(void) {
  const char* mode = getenv("TORCHTPU_EAGER_MODE");
  if (mode && !strcmp(mode, "debug")) return TTPU_MODE_DEBUG;
  if (mode && !strcmp(mode, "fused")) return TTPU_MODE_FUSED;
  if (mode && *mode && strcmp(mode, "strict")) return (ttpu_mode)-1;
  return TTPU_MODE_STRICT;
}

int ttpu_env_usable_cores(void) {
  int n = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) n = CPU_COUNT(&set);
  if (n <= 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? n : 1;
}

/* TORCHTPU_CPU_OPT_LEVEL: 0-3, or "xla" for XLA's own default (-1);
 * anything else is -2, which runtime creation refuses with a message. */
static int cpu_opt_level(void) {
  const char* env = getenv("TORCHTPU_CPU_OPT_LEVEL");
  if (!env || !*env) return 2;
  if (!strcmp(env, "xla")) return -1;
  if (env[0] >= '0' && env[0] <= '3' && !env[1]) return env[0] - '0';
  return -2;
}

/* TORCHTPU_CPU_SMALL_PROGRAM_ELEMENTS: a count of elements (0: off);
 * anything else is -1, which runtime creation refuses with a message. */
static int64_t cpu_small_program_elements(void) {
  const char* env = getenv("TORCHTPU_CPU_SMALL_PROGRAM_ELEMENTS");
  if (!env || !*env) return 16384;
  char* end = NULL;
  long long n = strtoll(env, &end, 10);
  if (end == env || *end || n < 0) return -1;
  return (int64_t)n;
}

void ttpu_runtime_options_from_env(ttpu_runtime_options* o) {
  memset(o, 0, sizeof(*o));
  o->initialized = TTPU_OPTIONS_FROM_ENV;
  o->program_cache_size = program_cache_size();
  o->mode = eager_mode();
  const char* env = getenv("TORCHTPU_FUSED_MAX_OPS");
  o->fused_max_ops = env && *env ? atoi(env) : 0;
  env = getenv("TORCHTPU_FUSED_REPEATS");
  o->fused_repeats = !(env && !strcmp(env, "0"));
  env = getenv("TORCHTPU_RECOMPILE_WARN");
  o->recompile_warn = env && *env ? atoi(env) : DEFAULT_RECOMPILE_WARN;
  o->dump_dir = NULL; /* read at each compile */
  o->debug_hlo = getenv("TORCHTPU_DEBUG_HLO") != NULL;
  o->check_indices = -1; /* read at each check */
  const char* off = getenv("TORCHTPU_DISK_CACHE");
  o->disk_cache = !(off && !strcmp(off, "0"));
  /* The default directory lives in a per-thread buffer (the struct
   * borrows its strings): valid until this thread's next call. */
  static _Thread_local char dflt[4096];
  const char* dir = getenv("TORCHTPU_CACHE_DIR");
  if (!dir) {
    const char* xdg = getenv("XDG_CACHE_HOME");
    const char* home = getenv("HOME");
    dir = NULL;
    if (xdg && *xdg) {
      snprintf(dflt, sizeof(dflt), "%s/torchtpu", xdg);
      dir = dflt;
    } else if (home && *home) {
      snprintf(dflt, sizeof(dflt), "%s/.cache/torchtpu", home);
      dir = dflt;
    }
  }
  o->cache_dir = dir;
  const char* mb = getenv("TORCHTPU_CACHE_MAX_MB");
  o->cache_max_bytes = mb && *mb ? (int64_t)(atof(mb) * 1048576.0) : 0;
  const char* threads = getenv("TORCHTPU_COMPILE_THREADS");
  /* Default: the usable cores, at most 16 (strict mode's programs compile
   * one op each, in program order: more threads rarely find work). */
  int cores = ttpu_env_usable_cores();
  o->compile_threads = threads && *threads ? atoi(threads)
                                           : (cores > 16 ? 16 : cores);
  if (o->compile_threads < 0) o->compile_threads = 0;
  o->cpu_opt_level = cpu_opt_level();
  o->cpu_small_program_elements = cpu_small_program_elements();
}

const char* ttpu_env_plugin_path(void) { return nonempty("TORCHTPU_PLUGIN"); }
const char* ttpu_env_libtpu_path(void) { return nonempty("TORCHTPU_LIBTPU"); }
const char* ttpu_env_dump_dir(void) { return getenv("TORCHTPU_DUMP_DIR"); }

int ttpu_env_check_indices(void) {
  const char* env = getenv("TORCHTPU_CHECK_INDICES");
  return !(env && !strcmp(env, "0"));
}

int ttpu_env_cpu_heap_keep(void) {
  const char* v = getenv("TORCHTPU_CPU_HEAP");
  if (v && !strcmp(v, "release")) return 0;
  const char* t = getenv("GLIBC_TUNABLES");
  if (t && strstr(t, "glibc.malloc.")) return 0;
  return !getenv("MALLOC_TRIM_THRESHOLD_") && !getenv("MALLOC_MMAP_THRESHOLD_") &&
         !getenv("MALLOC_TOP_PAD_");
}

int ttpu_env_bucket_poison(void) {
  const char* v = getenv("TORCHTPU_BUCKET_POISON");
  return v && *v && strcmp(v, "0");
}

ttpu_status* ttpu_env_buckets(int64_t* min, int* ladder, int64_t* sizes,
                              int* n_sizes) {
  *min = 128;
  *ladder = 1;
  *n_sizes = 0;
  const char* env = getenv("TORCHTPU_BUCKETS");
  if (!env || !*env) return NULL;
  if (!strcmp(env, "off") || !strcmp(env, "0")) {
    *min = 0;
    return NULL;
  }
  int ok = 1;
  if (*env >= '0' && *env <= '9') {
    /* Explicit sizes, ascending: "64,128,256". */
    const char* p = env;
    *ladder = 3;
    while (ok) {
      char* end = NULL;
      long long n = strtoll(p, &end, 10);
      ok = end != p && n >= 2 && n <= ((long long)1 << 40) &&
           *n_sizes < TTPU_ENV_MAX_BUCKETS &&
           (*n_sizes == 0 || n > sizes[*n_sizes - 1]) && (*end == ',' || !*end);
      if (!ok) break;
      sizes[(*n_sizes)++] = n;
      if (!*end) break;
      p = end + 1;
    }
    if (ok) {
      *min = sizes[0];
      return NULL;
    }
    *n_sizes = 0;
  } else {
    const char* colon = strchr(env, ':');
    size_t len = colon ? (size_t)(colon - env) : strlen(env);
    if (len == 4 && !strncmp(env, "pow2", 4)) *ladder = 1;
    else if (len == 7 && !strncmp(env, "quarter", 7)) *ladder = 2;
    else ok = 0;
    if (ok && colon) {
      char* end = NULL;
      long long n = strtoll(colon + 1, &end, 10);
      ok = end != colon + 1 && *end == 0 && n >= 2 && n <= ((long long)1 << 40);
      if (ok) *min = n;
    }
    if (ok) return NULL;
  }
  return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                          "TORCHTPU_BUCKETS=%s: expected off, pow2 or quarter, "
                          "optionally with :N for the smallest bucket "
                          "(pow2:128), or up to %d sizes in ascending order "
                          "(64,128,256)", env, TTPU_ENV_MAX_BUCKETS);
}

ttpu_status* ttpu_env_invalid_mode(void) {
  return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                          "TORCHTPU_EAGER_MODE=%s: expected debug, strict or "
                          "fused",
                          getenv("TORCHTPU_EAGER_MODE"));
}

ttpu_status* ttpu_env_invalid_cpu_opt_level(void) {
  return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                          "TORCHTPU_CPU_OPT_LEVEL=%s: expected 0, 1, 2 or 3, "
                          "or xla for XLA's own default",
                          getenv("TORCHTPU_CPU_OPT_LEVEL"));
}

ttpu_status* ttpu_env_invalid_cpu_small_program_elements(void) {
  return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                          "TORCHTPU_CPU_SMALL_PROGRAM_ELEMENTS=%s: expected a "
                          "number of elements (0: off)",
                          getenv("TORCHTPU_CPU_SMALL_PROGRAM_ELEMENTS"));
}

ttpu_status* ttpu_env_invalid_program_cache_size(void) {
  return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                          "TORCHTPU_PROGRAM_CACHE_SIZE=%s: expected the "
                          "number of programs to keep loaded (0: no bound)",
                          getenv("TORCHTPU_PROGRAM_CACHE_SIZE"));
}
