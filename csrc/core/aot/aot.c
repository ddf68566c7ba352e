/* aot.c - compiling our programs for TPU topologies with libtpu, no TPU
 * needed (public API in ttpu_aot.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../pjrt/ttpu_pjrt.h"
#include "ttpu_aot.h"
#include "../base/env.h"
#include "../prog/pool.h"
#include "../cache/disk.h"

#define LIBTPU_REL "libtpu/libtpu.so"
#define LIBTPU_PIP "libtpu==0.0.52"

struct ttpu_aot_compiler {
  ttpu_pjrt_plugin* plugin; /* owned */
  ttpu_pjrt_caps caps;      /* what it can do, probed at load */
};

struct ttpu_aot_target {
  ttpu_pjrt_topology* topology; /* owned */
  ttpu_pjrt_caps caps;          /* its compiler's */
};

static int is_file(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int exists(const char* path) {
  struct stat st;
  return stat(path, &st) == 0;
}

ttpu_status* ttpu_aot_find_compiler(const char* const* search_dirs,
                                    char** out) {
  if (!out) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  const char* env = ttpu_env_libtpu_path();
  if (env) {
    /* An explicit choice that is wrong must say so, not fall back. */
    if (!is_file(env))
      return ttpu_status_make(TTPU_NOT_FOUND,
                              "TORCHTPU_LIBTPU=%s: no such file", env);
    *out = strdup(env);
    return *out ? NULL
                : ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of memory");
  }
  for (size_t i = 0; search_dirs && search_dirs[i]; i++) {
    char* p = NULL;
    if (asprintf(&p, "%s/%s", search_dirs[i], LIBTPU_REL) < 0)
      return ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of memory");
    if (is_file(p)) {
      *out = p;
      return NULL;
    }
    free(p);
  }
  return ttpu_status_make(
      TTPU_NOT_FOUND,
      "libtpu is not installed (looked for %s in the Python environment): "
      "`pip install 'torchtpu[tpu]'` (the tpu extra: %s), or set "
      "TORCHTPU_LIBTPU to the path of libtpu.so",
      LIBTPU_REL, LIBTPU_PIP);
}

/* libtpu, started on a host without TPU chips, asks the cloud metadata
 * server who it is (about two minutes of retries before giving up), logs
 * errors about the missing worker list, and takes a process-exclusive lock
 * file so a second compiling process fails. None of that matters to a
 * compile-only session, so describe this host as a one-host slice and skip
 * the lock - only where the user has not said otherwise, and never on a TPU
 * host, where these variables would mislead the real runtime. */
static void set_compile_only_environment(void) {
  if (exists("/dev/accel0") || exists("/dev/vfio")) return;
  setenv("TPU_SKIP_MDS_QUERY", "1", 0);
  setenv("TPU_WORKER_HOSTNAMES", "localhost", 0);
  setenv("TPU_HOST_BOUNDS", "1,1,1", 0);
  setenv("ALLOW_MULTIPLE_LIBTPU_LOAD", "1", 0);
}

ttpu_status* ttpu_aot_compiler_load(const char* path,
                                    ttpu_aot_compiler** out) {
  if (!out) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  ttpu_aot_compiler* c = calloc(1, sizeof(*c));
  if (!c) return ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of memory");
  set_compile_only_environment();
  ttpu_status* s = ttpu_pjrt_plugin_load(path, &c->plugin);
  if (s) {
    free(c);
    return s;
  }
  ttpu_pjrt_plugin_caps(c->plugin, NULL, &c->caps);
  *out = c;
  return NULL;
}

void ttpu_aot_compiler_unload(ttpu_aot_compiler* c) {
  if (!c) return;
  ttpu_pjrt_plugin_unload(c->plugin);
  free(c);
}

const char* ttpu_aot_compiler_path(const ttpu_aot_compiler* c) {
  return c ? ttpu_pjrt_plugin_path(c->plugin) : "";
}

ttpu_status* ttpu_aot_target_create(ttpu_aot_compiler* c, const char* name,
                                    ttpu_aot_target** out) {
  if (!out) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!c) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "compiler is NULL");
  if (!c->caps.topology_compile)
    return ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "%s cannot compile for a topology without devices",
                            ttpu_pjrt_plugin_path(c->plugin));
  ttpu_aot_target* t = calloc(1, sizeof(*t));
  if (!t) return ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of memory");
  t->caps = c->caps;
  ttpu_status* s = ttpu_pjrt_topology_create(c->plugin, name, &t->topology);
  if (s) {
    free(t);
    return s;
  }
  *out = t;
  return NULL;
}

void ttpu_aot_target_destroy(ttpu_aot_target* t) {
  if (!t) return;
  ttpu_pjrt_topology_destroy(t->topology);
  free(t);
}

const char* ttpu_aot_target_name(const ttpu_aot_target* t) {
  return t ? ttpu_pjrt_topology_name(t->topology) : "";
}
const char* ttpu_aot_target_device_kind(const ttpu_aot_target* t) {
  return t ? ttpu_pjrt_topology_device_kind(t->topology) : "";
}
const char* ttpu_aot_target_platform_version(const ttpu_aot_target* t) {
  return t ? ttpu_pjrt_topology_platform_version(t->topology) : "";
}
int ttpu_aot_target_device_count(const ttpu_aot_target* t) {
  return t ? ttpu_pjrt_topology_device_count(t->topology) : 0;
}

/* --------------------------------------------------- compile options proto
 * CompileOptionsProto { executable_build_options (3) {
 *     num_replicas (4), num_partitions (5), use_spmd_partitioning (6) } }
 * No device assignment: the program is compiled for any assignment of that
 * many devices, which is all a fit/cost check needs. With partitions > 1
 * and no sharding annotations in the program, SPMD replicates it. */

/* buf must hold 32 bytes; returns the length written. */
static size_t encode_options(unsigned char* buf, int replicas, int partitions) {
  unsigned char ebo[24];
  size_t n = 0;
  ebo[n++] = 4 << 3; /* num_replicas, varint */
  n += ttpu_pjrt_put_varint(ebo + n, (uint64_t)replicas);
  ebo[n++] = 5 << 3; /* num_partitions, varint */
  n += ttpu_pjrt_put_varint(ebo + n, (uint64_t)partitions);
  if (partitions > 1) {
    ebo[n++] = 6 << 3; /* use_spmd_partitioning = true */
    ebo[n++] = 1;
  }
  size_t m = 0;
  buf[m++] = (3 << 3) | 2; /* executable_build_options, length-delimited */
  m += ttpu_pjrt_put_varint(buf + m, n);
  memcpy(buf + m, ebo, n);
  return m + n;
}

static void take_cost(void* user, const char* name, size_t len, double v) {
  ttpu_aot_stats* st = user;
#define IS(lit) (len == sizeof(lit) - 1 && memcmp(name, lit, len) == 0)
  if (IS("flops"))
    st->flops = v;
  else if (IS("transcendentals"))
    st->transcendentals = v;
  else if (IS("bytes accessed"))
    st->bytes_accessed = v;
  else if (IS("optimal_seconds"))
    st->optimal_seconds = v;
#undef IS
}

ttpu_status* ttpu_aot_compile(ttpu_aot_target* t, const char* mlir,
                              size_t mlir_len, int num_replicas,
                              int num_partitions, ttpu_aot_stats* out) {
  if (!t) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "target is NULL");
  if (num_replicas <= 0) num_replicas = 1;
  if (num_partitions <= 0) num_partitions = 1;
  int devices = ttpu_aot_target_device_count(t);
  if ((int64_t)num_replicas * num_partitions > devices)
    return ttpu_status_make(
        TTPU_INVALID_ARGUMENT,
        "%d replicas x %d partitions need %lld devices; topology '%s' has %d",
        num_replicas, num_partitions,
        (long long)num_replicas * num_partitions, ttpu_aot_target_name(t),
        devices);
  unsigned char opts[32];
  size_t opts_len = encode_options(opts, num_replicas, num_partitions);
  ttpu_pjrt_executable* e = NULL;
  ttpu_status* s = ttpu_pjrt_topology_compile(t->topology, mlir, mlir_len,
                                              opts, opts_len, &e);
  if (s) {
    if (ttpu_status_code(s) == TTPU_RESOURCE_EXHAUSTED)
      return ttpu_status_annotate(s,
                                  "the program does not fit in the HBM of "
                                  "one %s device (topology '%s')",
                                  ttpu_aot_target_device_kind(t),
                                  ttpu_aot_target_name(t));
    return ttpu_status_annotate(s, "compiling for topology '%s'",
                                ttpu_aot_target_name(t));
  }
  if (out) {
    memset(out, 0, sizeof(*out));
    out->flops = out->transcendentals = out->bytes_accessed =
        out->optimal_seconds = -1;
    ttpu_pjrt_memory_stats ms;
    memset(&ms, 0, sizeof(ms));
    s = ttpu_pjrt_executable_memory_stats(t->topology, e, &ms);
    if (!s) {
      out->argument_bytes = ms.argument_bytes;
      out->output_bytes = ms.output_bytes;
      out->alias_bytes = ms.alias_bytes;
      out->temp_bytes = ms.temp_bytes;
      out->generated_code_bytes = ms.generated_code_bytes;
      out->peak_bytes = ms.peak_bytes;
      /* Without cost analysis the cost figures stay -1 (unknown). */
      if (t->caps.cost_analysis)
        s = ttpu_pjrt_executable_cost_analysis(t->topology, e, take_cost, out);
    }
  }
  ttpu_pjrt_executable_destroy(t->topology, e);
  return s;
}

/* ------------------------------------------- filling a TPU compile cache
 * (ttpu_aot.h). The namespace comes from ttpu_disk_namespace_make, the
 * function the runtime uses for its own client, fed with what a libtpu
 * client of the target's chips reports. */

struct ttpu_aot_cache {
  ttpu_aot_target* target; /* borrowed */
  ttpu_disk* disk;         /* owned */
  char ns[17];
};

ttpu_status* ttpu_aot_cache_open(ttpu_aot_compiler* c, ttpu_aot_target* t,
                                 const char* root, ttpu_aot_cache** out) {
  if (!out) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!c || !t || !root || !*root)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "compiler, target and directory are required");
  const char* platform = ttpu_pjrt_topology_platform_name(t->topology);
  ttpu_pjrt_caps caps;
  ttpu_pjrt_plugin_caps(c->plugin, platform, &caps);
  int major = 0, minor = 0;
  ttpu_pjrt_plugin_version(c->plugin, &major, &minor);
  ttpu_disk_namespace ns;
  ttpu_disk_namespace_make(platform,
                           ttpu_pjrt_topology_platform_version(t->topology),
                           major, minor, ttpu_pjrt_compile_options_id(),
                           caps.host_code, &ns);
  ttpu_aot_cache* cache = calloc(1, sizeof(*cache));
  if (!cache) return ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of memory");
  cache->target = t;
  snprintf(cache->ns, sizeof(cache->ns), "%016llx",
           (unsigned long long)ttpu_disk_namespace_id(&ns));
  /* No size cap below what is asked for: a filled cache is meant whole. */
  ttpu_status* s = ttpu_disk_open(&ns, root, (int64_t)1 << 40, &cache->disk);
  if (s) {
    free(cache);
    return s;
  }
  *out = cache;
  return NULL;
}

void ttpu_aot_cache_close(ttpu_aot_cache* cache) {
  if (!cache) return;
  ttpu_disk_close(cache->disk);
  free(cache);
}

const char* ttpu_aot_cache_namespace(const ttpu_aot_cache* cache) {
  return cache ? cache->ns : "";
}

ttpu_status* ttpu_aot_cache_fill(ttpu_aot_cache* cache, const int64_t* key,
                                 size_t n_key, const char* mlir,
                                 size_t mlir_len, const void* results,
                                 size_t results_len, int n_results,
                                 const void* options, size_t options_len,
                                 ttpu_aot_fill_outcome* outcome,
                                 int64_t* bytes) {
  if (!cache || !key || !n_key || !outcome || !bytes)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "NULL argument");
  *bytes = 0;
  if (n_results < 0 ||
      results_len != (size_t)n_results * sizeof(ttpu_result_plan) ||
      (n_results && !results))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "result plans: %zu bytes for %d results (this "
                            "engine's plans are %zu bytes each)",
                            results_len, n_results, sizeof(ttpu_result_plan));
  if (ttpu_disk_contains(cache->disk, key, n_key)) {
    *outcome = TTPU_AOT_FILL_CACHED;
    return NULL;
  }
  unsigned char opts[32];
  if (!options || !options_len) {
    options_len = encode_options(opts, 1, 1);
    options = opts;
  }
  ttpu_aot_target* t = cache->target;
  ttpu_pjrt_executable* e = NULL;
  ttpu_status* s = ttpu_pjrt_topology_compile(t->topology, mlir, mlir_len,
                                              options, options_len, &e);
  if (s)
    return ttpu_status_annotate(s, "compiling for topology '%s'",
                                ttpu_aot_target_name(t));
  void* exe = NULL;
  size_t exe_len = 0;
  s = ttpu_pjrt_executable_serialize(t->topology, e, &exe, &exe_len);
  ttpu_pjrt_executable_destroy(t->topology, e);
  if (s) return ttpu_status_annotate(s, "serializing the executable");
  int rc = ttpu_disk_store_serialized(cache->disk, key, n_key, results,
                                      n_results, exe, exe_len);
  free(exe);
  if (rc <= 0)
    return ttpu_status_make(TTPU_FAILED_PRECONDITION,
                            "cannot write the compile cache entry%s%s",
                            rc < 0 ? ": " : "",
                            rc < 0 ? ttpu_disk_error(cache->disk) : "");
  *outcome = TTPU_AOT_FILL_COMPILED;
  /* The file: header, key, plans, executable, checksum (disk.c's layout). */
  *bytes = (int64_t)(8 + 8 + 8 + n_key * sizeof(int64_t) + 8 + results_len +
                     8 + exe_len + 8);
  return NULL;
}

void ttpu_aot_namespace_id(const char* platform_name,
                           const char* platform_version, int api_major,
                           int api_minor, const char* options_id,
                           int host_code, char out[17]) {
  ttpu_disk_namespace ns;
  ttpu_disk_namespace_make(platform_name, platform_version, api_major,
                           api_minor,
                           options_id ? options_id
                                      : ttpu_pjrt_compile_options_id(),
                           host_code, &ns);
  snprintf(out, 17, "%016llx", (unsigned long long)ttpu_disk_namespace_id(&ns));
}

const char* ttpu_aot_options_id(void) { return ttpu_pjrt_compile_options_id(); }

const char* ttpu_aot_target_platform_name(const ttpu_aot_target* t) {
  return t ? ttpu_pjrt_topology_platform_name(t->topology) : "";
}

void ttpu_aot_compiler_api_version(const ttpu_aot_compiler* c, int* major,
                                   int* minor) {
  *major = *minor = 0;
  if (c) ttpu_pjrt_plugin_version(c->plugin, major, minor);
}

int ttpu_aot_read_entry(const char* path, ttpu_aot_entry* out) {
  memset(out, 0, sizeof(*out));
  ttpu_disk_record r;
  if (!path || !ttpu_disk_read_file(path, &r)) return 0;
  snprintf(out->ns, sizeof(out->ns), "%016llx", (unsigned long long)r.ns);
  out->key = r.key;
  out->n_key = r.n_key;
  out->n_results = r.n_results;
  out->exe_len = r.exe_len;
  r.key = NULL;
  ttpu_disk_record_free(&r);
  return 1;
}

void ttpu_aot_entry_free(ttpu_aot_entry* e) {
  if (!e) return;
  free(e->key);
  memset(e, 0, sizeof(*e));
}

/* ------------------------------------------------------------ batch */

typedef struct {
  ttpu_aot_target* t;
  const char* text;
  size_t len;
  int replicas, partitions;
  ttpu_aot_stats* stats;
} aot_job;

static ttpu_status* run_aot_job(void* arg) {
  aot_job* j = arg;
  return ttpu_aot_compile(j->t, j->text, j->len, j->replicas, j->partitions,
                          j->stats);
}

ttpu_status* ttpu_aot_compile_many(ttpu_aot_target* t, int n,
                                   const char* const* texts,
                                   const size_t* lens, int num_replicas,
                                   int num_partitions, int threads,
                                   ttpu_aot_stats* stats_out,
                                   ttpu_status** status_out,
                                   double* seconds_out) {
  if (!t) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "target is NULL");
  if (n < 0 || (n > 0 && (!texts || !lens || !status_out)))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "compile_many: %d programs without their arrays",
                            n);
  for (int k = 0; k < n; ++k) status_out[k] = NULL;
  if (n == 0) return NULL;
  if (threads > n) threads = n;
  aot_job* jobs = calloc((size_t)n, sizeof(*jobs));
  ttpu_pool_job** handles = calloc((size_t)n, sizeof(*handles));
  ttpu_pool* pool = NULL;
  ttpu_status* s = !jobs || !handles ? ttpu_status_oom() : NULL;
  if (!s) s = ttpu_pool_create(threads > 1 ? threads : 0, &pool);
  for (int k = 0; !s && k < n; ++k) {
    jobs[k] = (aot_job){t, texts[k], lens[k], num_replicas, num_partitions,
                        stats_out ? &stats_out[k] : NULL};
    s = ttpu_pool_submit_fn(pool, run_aot_job, &jobs[k], &handles[k]);
  }
  for (int k = 0; k < n; ++k) {
    if (!handles || !handles[k]) continue;
    ttpu_pool_job_wait(handles[k]);
    status_out[k] = ttpu_pool_job_take_status(handles[k]);
    if (seconds_out) seconds_out[k] = ttpu_pool_job_seconds(handles[k]);
    ttpu_pool_job_free(handles[k]);
  }
  ttpu_pool_destroy(pool);
  free(handles);
  free(jobs);
  return s;
}
