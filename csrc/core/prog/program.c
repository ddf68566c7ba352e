/* program.c - the program front door: every compiled program the engine
 * runs (one op, a fused window, a graph, a collective) comes through
 * ttpu_prog_get: memory cache, then disk cache, then lower and compile,
 * then the compile log, trace reports and dump. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "program.h"
#include "../base/env.h"

static void trace_begin(ttpu_prog_ctx* pc, int device, const char* what,
                        int n_ops) {
  if (pc->hooks.compile_begin)
    pc->hooks.compile_begin(pc->hooks.host, device, what, n_ops);
}

static void trace_end(ttpu_prog_ctx* pc, int device, const char* what,
                      int n_ops, int from_disk, int failed) {
  if (pc->hooks.compile_end)
    pc->hooks.compile_end(pc->hooks.host, device, what, n_ops, from_disk,
                          failed);
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The dump directory: every compiled program's StableHLO, one file each,
 * named by what it runs and its signature hash, so reruns overwrite
 * rather than pile up. */
static void dump_program(const char* dir, const ttpu_prog_request* req,
                         const int64_t* key, size_t n_key, const char* text,
                         size_t len) {
  if (!dir || !*dir) return;
  char path[4096];
  if (req->dump_name) {
    snprintf(path, sizeof(path), "%s/%s.mlir", dir, req->dump_name);
  } else {
    uint64_t h = 1469598103934665603ull;
    for (size_t k = 0; k < n_key; ++k) {
      h ^= (uint64_t)key[k];
      h *= 1099511628211ull;
    }
    char name[96];
    size_t j = 0;
    for (const char* c = req->what; *c && j + 1 < sizeof(name); ++c)
      name[j++] = (*c == ' ' || *c == '/' || *c == '(' || *c == ')') ? '_' : *c;
    name[j] = 0;
    snprintf(path, sizeof(path), "%s/%s-%016llx.mlir", dir, name,
             (unsigned long long)h);
  }
  FILE* f = fopen(path, "wb");
  if (!f) return; /* a dump is a diagnostic: never fail the op for it */
  fwrite(text, 1, len, f);
  fclose(f);
}

ttpu_cache_entry* ttpu_prog_peek(ttpu_prog_ctx* pc, const int64_t* key,
                                 size_t n_key) {
  return ttpu_cache_find(pc->cache, key, n_key);
}

ttpu_cache_entry* ttpu_prog_find(ttpu_prog_ctx* pc, int device,
                                 const int64_t* key, size_t n_key) {
  ttpu_cache_entry* e = ttpu_prog_peek(pc, key, n_key);
  if (e) {
    e->hits++;
    pc->stats[device]->cache_hits++;
  }
  return e;
}

int ttpu_prog_note_reload(ttpu_prog_ctx* pc, const int64_t* key, size_t n_key,
                          const char* what) {
    if (!ttpu_cache_was_evicted(pc->cache, key, n_key)) return 0;
  pc->programs_reloaded++;
  snprintf(pc->last_reason, sizeof(pc->last_reason),
           "%s: reloaded: unloaded earlier as one of the least recently used "
           "programs (the program cache keeps %lld; "
           "TORCHTPU_PROGRAM_CACHE_SIZE)",
           what, (long long)ttpu_cache_capacity(pc->cache));
  return 1;
}

/* A program compiled just now (e: its exec and results, taken; dt: the
 * compile's seconds): counted, logged, written to the disk cache,
 * inserted into the memory cache and its trace ended (under the owner's lock). */
static ttpu_status* keep_compiled(ttpu_prog_ctx* pc, int device,
                                  const int64_t* key, size_t n_key,
                                  const ttpu_prog_request* req,
                                  ttpu_cache_entry* e, double dt,
                                  ttpu_cache_entry** out) {
    ttpu_stats* st = pc->stats[device];
  st->compiles++;
  st->compile_seconds += dt;
  ttpu_prog_log_compile(pc, req->what, req->reason, dt, 0, req->n_ops);
  int stored = req->use_disk && pc->disk
                   ? ttpu_disk_store(pc->disk, pc->client, key, n_key, e)
                   : 0;
  if (stored > 0) st->disk_writes++;
  if (stored < 0) {
    ttpu_prog_warn(pc,
                 "torchtpu: cannot write the persistent compile cache (%s); "
                 "continuing without it for this process "
                 "(TORCHTPU_CACHE_DIR chooses another directory)",
                 ttpu_disk_error(pc->disk));
    ttpu_disk_close(pc->disk);
    pc->disk = NULL;
  }
  snprintf(e->what, sizeof(e->what), "%s", req->what);
  ttpu_status* s = ttpu_cache_insert(pc->cache, key, n_key, e, out);
  if (s) {
    ttpu_pjrt_exec_destroy(pc->client, e->exec);
    free(e->results);
  }
  trace_end(pc, device, req->what, req->n_ops, 0, s != NULL);
  return s;
}

/* Loads key from the disk cache into the memory cache: 1 and *out on a
 * hit (counted, logged, its trace ended), else 0 (under the owner's lock). traced:
 * the compile's trace began already; else it begins on a hit. *ins: the
 * insert's error. */
static int load_from_disk(ttpu_prog_ctx* pc, int device, const int64_t* key,
                          size_t n_key, const ttpu_prog_request* req,
                          int traced, ttpu_cache_entry** out,
                          ttpu_status** ins) {
    ttpu_cache_entry e = {0};
  double t0 = now_seconds();
  *ins = NULL;
  if (!(req->use_disk && pc->disk &&
        ttpu_disk_load(pc->disk, pc->client, key, n_key, &e)))
    return 0;
  double dt = now_seconds() - t0;
  if (!traced) trace_begin(pc, device, req->what, req->n_ops);
  ttpu_stats* st = pc->stats[device];
  st->disk_hits++;
  st->disk_load_seconds += dt;
  ttpu_prog_log_compile(pc, req->what, req->reason, dt, 1, req->n_ops);
  snprintf(e.what, sizeof(e.what), "%s", req->what);
  ttpu_status* s = ttpu_cache_insert(pc->cache, key, n_key, &e, out);
  if (s) {
    ttpu_pjrt_exec_destroy(pc->client, e.exec);
    free(e.results);
  }
  trace_end(pc, device, req->what, req->n_ops, 1, s != NULL);
  *ins = s;
  return 1;
}

/* A program's text was just made: dumped (the dump directory option) and
 * handed to a cache filler's sink (ttpu_aot_set_program_sink) when the
 * program is one the disk cache would keep. */
static void lowered(ttpu_prog_ctx* pc, const ttpu_prog_request* req,
                    const int64_t* key, size_t n_key, const char* text,
                    size_t len, const ttpu_result_plan* results,
                    int n_results) {
    dump_program(pc->opts->dump_dir ? pc->opts->dump_dir
                                             : ttpu_env_dump_dir(),
               req, key, n_key, text, len);
  if (pc->sink && req->use_disk)
    pc->sink(pc->sink_user, req->what, key, n_key, text, len, results,
             (size_t)n_results * sizeof(*results), n_results, req->options,
             req->options_len);
}

ttpu_status* ttpu_prog_compile(ttpu_prog_ctx* pc, int device,
                               const int64_t* key, size_t n_key,
                               const ttpu_prog_request* req,
                               ttpu_cache_entry** out) {
  const char* what = req->what;
  int n_ops = req->n_ops;
  ttpu_cache_entry e = {0};
  trace_begin(pc, device, what, n_ops);
  ttpu_status* s = NULL;
  if (load_from_disk(pc, device, key, n_key, req, 1, out, &s)) return s;
  char* text = NULL;
  size_t len = 0;
  s = req->lower(req->ctx, &text, &len, &e.results, &e.n_results);
  if (s) {
    trace_end(pc, device, what, n_ops, 0, 1);
    return ttpu_status_annotate(s, "lowering %s", what);
  }
  lowered(pc, req, key, n_key, text, len, e.results, e.n_results);
  double t0 = now_seconds();
  s = ttpu_pjrt_compile(pc->client, text, len, req->options,
                        req->options_len, &e.exec);
  double dt = now_seconds() - t0;
  if (s) {
    free(e.results);
    s = ttpu_status_annotate(s, "compiling %s", what);
    if (pc->opts->debug_hlo)
      fprintf(stderr, "%.*s\n", (int)len, text);
    free(text);
    trace_end(pc, device, what, n_ops, 0, 1);
    return s;
  }
  free(text);
  return keep_compiled(pc, device, key, n_key, req, &e, dt, out);
}

ttpu_status* ttpu_prog_prepare(ttpu_prog_ctx* pc, int device,
                               const int64_t* key, size_t n_key,
                               const ttpu_prog_request* req,
                               ttpu_cache_entry** entry,
                               ttpu_prog_lowered* low) {
  memset(low, 0, sizeof(*low));
  *entry = NULL;
  ttpu_status* s = NULL;
  if (load_from_disk(pc, device, key, n_key, req, 0, entry, &s)) return s;
  s = req->lower(req->ctx, &low->text, &low->len, &low->results,
                 &low->n_results);
  /* A compile's trace pair is reported where its outcome is known: here
   * for a lowering error, else when it is collected (ttpu_prog_finish),
   * so that pairs never interleave. */
  if (s) {
    trace_begin(pc, device, req->what, req->n_ops);
    trace_end(pc, device, req->what, req->n_ops, 0, 1);
    free(low->text);
    free(low->results);
    memset(low, 0, sizeof(*low));
    return ttpu_status_annotate(s, "lowering %s", req->what);
  }
  lowered(pc, req, key, n_key, low->text, low->len, low->results,
          low->n_results);
  return NULL;
}

ttpu_status* ttpu_prog_finish(ttpu_prog_ctx* pc, int device,
                              const int64_t* key, size_t n_key,
                              const ttpu_prog_request* req,
                              ttpu_pjrt_exec* exec, ttpu_status* compile_error,
                              double seconds, ttpu_result_plan* results,
                              int n_results, const char* text, size_t len,
                              ttpu_cache_entry** out) {
  *out = NULL;
  trace_begin(pc, device, req->what, req->n_ops);
  if (compile_error || !exec) {
    free(results);
    if (exec) ttpu_pjrt_exec_destroy(pc->client, exec);
    ttpu_status* s =
        compile_error ? compile_error
                      : ttpu_status_make(TTPU_INTERNAL, "no executable");
    s = ttpu_status_annotate(s, "compiling %s", req->what);
    if (pc->opts->debug_hlo && text)
      fprintf(stderr, "%.*s\n", (int)len, text);
    trace_end(pc, device, req->what, req->n_ops, 0, 1);
    return s;
  }
  ttpu_cache_entry e = {0};
  e.exec = exec;
  e.results = results;
  e.n_results = n_results;
  return keep_compiled(pc, device, key, n_key, req, &e, seconds, out);
}
