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

/* e's executable written to the disk cache under key (when the request
 * keeps programs there); a failed write turns the disk cache off for the
 * process, with a warning. */
static void store_on_disk(ttpu_prog_ctx* pc, int device, const int64_t* key,
                          size_t n_key, const ttpu_prog_request* req,
                          ttpu_cache_entry* e) {
  /* An executable loaded from the disk is never serialized again: entries
   * written from one (a shared executable's second key) came back, in long
   * runs of PyTorch's linalg tests, without some of their kernels
   * ("Function ... not found" at their first run). */
  int stored = req->use_disk && pc->disk && !ttpu_pjrt_exec_deserialized(e->exec)
                   ? ttpu_disk_store(pc->disk, pc->client, key, n_key, e)
                   : 0;
  if (stored > 0) pc->stats[device]->disk_writes++;
  if (stored < 0) {
    ttpu_prog_warn(pc,
                 "torchtpu: cannot write the persistent compile cache (%s); "
                 "continuing without it for this process "
                 "(TORCHTPU_CACHE_DIR chooses another directory)",
                 ttpu_disk_error(pc->disk));
    ttpu_disk_close(pc->disk);
    pc->disk = NULL;
  }
}

/* ------------------------------------------------- programs by their text
 *
 * Signatures differ where programs do not: an out= form and its
 * functional op (bmm.out, bmm), an in-place op on a fresh storage and the
 * op, views that read the same elements. Each compiled program's text (and
 * compile options) is remembered by a 128-bit hash, with the key it was
 * stored under; a new signature whose lowering gives a remembered text of
 * a program still loaded takes that executable (shared, counted once per
 * holder) instead of compiling it again. A direct-mapped table: a slot
 * keeps the last text hashed to it. */
#define TEXT_SLOTS 4096

struct ttpu_text_slot {
  uint64_t h[2];
  int64_t* key; /* owned; NULL: empty */
  size_t n_key;
};

static void text_hash(const char* text, size_t len, const void* options,
                      size_t options_len, uint64_t h[2]) {
  uint64_t a = 1469598103934665603ull, b = 0x9e3779b97f4a7c15ull;
  const unsigned char* parts[2] = {(const unsigned char*)text, options};
  size_t lens[2] = {len, options ? options_len : 0};
  for (int p = 0; p < 2; ++p) {
    for (size_t i = 0; i < lens[p]; ++i) {
      a = (a ^ parts[p][i]) * 1099511628211ull;
      b = (b + parts[p][i]) * 0xff51afd7ed558ccdull;
      b ^= b >> 29;
    }
    a = (a ^ (uint64_t)lens[p]) * 1099511628211ull;
    b = (b + (uint64_t)lens[p]) * 0xc4ceb9fe1a85ec53ull;
  }
  h[0] = a;
  h[1] = b ^ (b >> 31);
}

/* Remembers that the program of text hash h is stored under key. */
static void text_note(ttpu_prog_ctx* pc, const uint64_t h[2],
                      const int64_t* key, size_t n_key) {
  if (!pc->texts) {
    pc->texts = calloc(TEXT_SLOTS, sizeof(*pc->texts));
    if (!pc->texts) return; /* sharing is an optimisation: none then */
  }
  struct ttpu_text_slot* slot = &pc->texts[h[0] & (TEXT_SLOTS - 1)];
  int64_t* k = malloc(n_key * sizeof(*k) + 1);
  if (!k) return;
  memcpy(k, key, n_key * sizeof(*k));
  free(slot->key);
  slot->h[0] = h[0];
  slot->h[1] = h[1];
  slot->key = k;
  slot->n_key = n_key;
}

/* When a loaded program has text hash h, key takes its executable with
 * its own results (taken from *results): 1 and *out (or *ins, the
 * insert's error); else 0. Counted, written to the disk cache under key
 * (unless the executable came from the disk: store_on_disk), traced as a
 * load; not a compile. */
static int share_same_text(ttpu_prog_ctx* pc, int device, const int64_t* key,
                           size_t n_key, const ttpu_prog_request* req,
                           const uint64_t h[2], ttpu_result_plan** results,
                           int n_results, int traced, ttpu_cache_entry** out,
                           ttpu_status** ins) {
  *ins = NULL;
  if (!pc->texts) return 0;
  struct ttpu_text_slot* slot = &pc->texts[h[0] & (TEXT_SLOTS - 1)];
  if (!slot->key || slot->h[0] != h[0] || slot->h[1] != h[1]) return 0;
  ttpu_cache_entry* src = ttpu_cache_find(pc->cache, slot->key, slot->n_key);
  if (!src || !src->exec) return 0;
  if (!traced) trace_begin(pc, device, req->what, req->n_ops);
  ttpu_cache_entry e = {0};
  e.exec = ttpu_pjrt_exec_retain(src->exec);
  e.results = *results;
  e.n_results = n_results;
  *results = NULL;
  pc->stats[device]->programs_shared++;
  store_on_disk(pc, device, key, n_key, req, &e);
  snprintf(e.what, sizeof(e.what), "%s", req->what);
  ttpu_status* s = ttpu_cache_insert(pc->cache, key, n_key, &e, out);
  if (s) {
    ttpu_pjrt_exec_destroy(pc->client, e.exec);
    free(e.results);
  } else {
    text_note(pc, h, key, n_key); /* the newest holder: evicted last */
  }
  trace_end(pc, device, req->what, req->n_ops, 1, s != NULL);
  *ins = s;
  return 1;
}

void ttpu_prog_texts_free(ttpu_prog_ctx* pc) {
  if (!pc->texts) return;
  for (int i = 0; i < TEXT_SLOTS; ++i) free(pc->texts[i].key);
  free(pc->texts);
  pc->texts = NULL;
}

/* A program compiled just now (e: its exec and results, taken; dt: the
 * compile's seconds; h: its text's hash): counted, logged, written to the
 * disk cache, inserted into the memory cache and its trace ended (under
 * the owner's lock). */
static ttpu_status* keep_compiled(ttpu_prog_ctx* pc, int device,
                                  const int64_t* key, size_t n_key,
                                  const ttpu_prog_request* req,
                                  ttpu_cache_entry* e, double dt,
                                  const uint64_t h[2],
                                  ttpu_cache_entry** out) {
  ttpu_stats* st = pc->stats[device];
  st->compiles++;
  st->compile_seconds += dt;
  ttpu_prog_log_compile(pc, req->what, req->reason, dt, 0, req->n_ops);
  store_on_disk(pc, device, key, n_key, req, e);
  snprintf(e->what, sizeof(e->what), "%s", req->what);
  ttpu_status* s = ttpu_cache_insert(pc->cache, key, n_key, e, out);
  if (s) {
    ttpu_pjrt_exec_destroy(pc->client, e->exec);
    free(e->results);
  } else if (h) {
    text_note(pc, h, key, n_key);
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
  uint64_t h[2];
  text_hash(text, len, req->options, req->options_len, h);
  if (share_same_text(pc, device, key, n_key, req, h, &e.results,
                      e.n_results, 1, out, &s)) {
    free(text);
    return s;
  }
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
  return keep_compiled(pc, device, key, n_key, req, &e, dt, h, out);
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
  text_hash(low->text, low->len, req->options, req->options_len, low->hash);
  return ttpu_prog_share(pc, device, key, n_key, req, low, entry);
}

ttpu_status* ttpu_prog_share(ttpu_prog_ctx* pc, int device,
                             const int64_t* key, size_t n_key,
                             const ttpu_prog_request* req,
                             ttpu_prog_lowered* low, ttpu_cache_entry** entry) {
  ttpu_status* s = NULL;
  *entry = NULL;
  if (share_same_text(pc, device, key, n_key, req, low->hash, &low->results,
                      low->n_results, 0, entry, &s)) {
    free(low->text);
    memset(low, 0, sizeof(*low));
  }
  return s;
}

ttpu_status* ttpu_prog_finish(ttpu_prog_ctx* pc, int device,
                              const int64_t* key, size_t n_key,
                              const ttpu_prog_request* req,
                              ttpu_pjrt_exec* exec, ttpu_status* compile_error,
                              double seconds, ttpu_result_plan* results,
                              int n_results, const char* text, size_t len,
                              const uint64_t hash[2],
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
  return keep_compiled(pc, device, key, n_key, req, &e, seconds, hash, out);
}
