/* program.h - the program layer (internal): from a planned call, a fused
 * window, a graph or a collective's text to a compiled, cached program,
 * and an execution's results back to their storages.
 *
 * A program is found in two steps, both under the owner's lock: ttpu_prog_find looks
 * in the memory cache (the hot path: no allocation, no lowering); on a
 * miss the caller says why (ttpu_plan_note_recompile, ttpu_prog_note_reload)
 * and ttpu_prog_compile gets it from the disk cache or lowers and compiles
 * it. The compile step needs only the request, never the plan, so that it
 * can run on a compile thread: ttpu_prog_prepare and ttpu_prog_finish
 * split ttpu_prog_compile around it (prog/pool.h). */
#ifndef TTPU_PROG_PROGRAM_H_
#define TTPU_PROG_PROGRAM_H_

#include "plan.h"

/* Makes a program's text on a cache miss: *text malloc'ed (the caller of
 * the callback frees it), *results too (kept by the cache entry). */
typedef ttpu_status* (*ttpu_lower_cb)(void* ctx, char** text, size_t* len,
                                      ttpu_result_plan** results,
                                      int* n_results);

/* One program to compile. */
typedef struct {
  const char* what;     /* its label: op name, "fused window (N ops)" ... */
  int n_ops;
  const char* reason;   /* why it compiles, for the compile log */
  ttpu_lower_cb lower;  /* makes the text (called only on a miss) */
  void* ctx;
  /* Serialized CompileOptionsProto; NULL: the client's default (one
   * replica, one partition). */
  const void* options;
  size_t options_len;
  /* 0: stays out of the disk cache (programs bound to their devices). */
  int use_disk;
  /* The dump file's name in the dump directory (".mlir" appended); NULL:
   * named by `what` and the key's hash. */
  const char* dump_name;
} ttpu_prog_request;

/* The memory cache's entry for key, counted as a hit on device's stats,
 * or NULL (under the owner's lock). */
ttpu_cache_entry* ttpu_prog_find(ttpu_prog_ctx* pc, int device,
                                 const int64_t* key, size_t n_key);
/* The same entry, not counted: for a caller that counts its own use (a
 * graph's replay binding the program it was captured for). */
ttpu_cache_entry* ttpu_prog_peek(ttpu_prog_ctx* pc, const int64_t* key,
                                 size_t n_key);

/* After a memory cache miss (under the owner's lock): the entry for `key` from the
 * disk cache, else lowered with req->lower and compiled with req->options;
 * logged, traced, dumped (the dump directory option) and inserted into the
 * memory cache. A failed compile prints its text to stderr when the debug
 * HLO option is on. *entry is owned by the cache. */
ttpu_status* ttpu_prog_compile(ttpu_prog_ctx* pc, int device,
                               const int64_t* key, size_t n_key,
                               const ttpu_prog_request* req,
                               ttpu_cache_entry** entry);

/* Frees the memory of programs' texts (ttpu_prog_ctx_free_state). */
void ttpu_prog_texts_free(ttpu_prog_ctx* pc);

/* The same in two steps, for a compile on a compile thread (strict mode
 * with the compile pool, exec/strict.c), both under the owner's lock:
 *
 * ttpu_prog_prepare: the entry from the disk cache (*entry set, inserted
 * into the memory cache and logged, as ttpu_prog_compile does), else the
 * program lowered with req->lower into *low (and dumped): the caller
 * compiles low->text elsewhere (ttpu_pool_submit_compile takes it) and
 * owns low's arrays until it hands them to ttpu_prog_finish. A lowering
 * error comes back at once, annotated "lowering <what>".
 *
 * ttpu_prog_finish: the compile's outcome (exec, or compile_error, both
 * taken; seconds: its wall time on the compile thread) counted, logged,
 * written to the disk cache, inserted into the memory cache and traced,
 * exactly as ttpu_prog_compile would; takes results. A failure comes back
 * annotated "compiling <what>" (text printed when the debug HLO option is
 * on). req needs only what, n_ops, reason and use_disk; hash is low's
 * (NULL: the program is not remembered for sharing). */
typedef struct {
  char* text;
  size_t len;
  ttpu_result_plan* results;
  int n_results;
  uint64_t hash[2]; /* of the text and options: programs of one text share */
} ttpu_prog_lowered;
ttpu_status* ttpu_prog_prepare(ttpu_prog_ctx* pc, int device,
                               const int64_t* key, size_t n_key,
                               const ttpu_prog_request* req,
                               ttpu_cache_entry** entry,
                               ttpu_prog_lowered* low);

/* After ttpu_prog_prepare lowered low: when a program of low's text was
 * loaded since (one compiling when low was prepared, collected now), key
 * takes its executable as ttpu_prog_prepare would have: *entry set and
 * low emptied. Else *entry NULL and low unchanged. Under the owner's lock. */
ttpu_status* ttpu_prog_share(ttpu_prog_ctx* pc, int device,
                             const int64_t* key, size_t n_key,
                             const ttpu_prog_request* req,
                             ttpu_prog_lowered* low, ttpu_cache_entry** entry);
ttpu_status* ttpu_prog_finish(ttpu_prog_ctx* pc, int device,
                              const int64_t* key, size_t n_key,
                              const ttpu_prog_request* req,
                              ttpu_pjrt_exec* exec, ttpu_status* compile_error,
                              double seconds, ttpu_result_plan* results,
                              int n_results, const char* text, size_t len,
                              const uint64_t hash[2],
                              ttpu_cache_entry** out);

/* On a memory cache miss (under the owner's lock): when key is a program the cache
 * evicted, counts the reload, sets the last compile reason to say so and
 * returns 1 (it is no recompile: nothing about the op changed); else 0. */
int ttpu_prog_note_reload(ttpu_prog_ctx* pc, const int64_t* key, size_t n_key,
                          const char* what);

/* Appends a compile to the log (prog/log.c, under the owner's lock). */
void ttpu_prog_log_compile(ttpu_prog_ctx* pc, const char* what,
                           const char* reason, double seconds, int from_disk,
                           int n_ops);

/* Whether data-dependent checks are read (the check indices option). */
int ttpu_prog_checks_on(const ttpu_prog_ctx* pc);
/* Reads a data-dependent check result; NULL when it passed (results.c). */
ttpu_status* ttpu_prog_read_check(ttpu_prog_ctx* pc, int dev,
                                  const ttpu_result_plan* rp,
                                  ttpu_pjrt_buffer* buf);
/* Gives each result of an execution to its storage (buffer_of(ctx, slot)),
 * padded as pads[slot] says (pads NULL: none padded), the rng state, or
 * reads it as a data-dependent check; returns the first check's error
 * (results.c, under the owner's lock). */
ttpu_status* ttpu_prog_take_results(ttpu_prog_ctx* pc, int dev,
                                    const ttpu_cache_entry* e,
                                    ttpu_pjrt_buffer** outs,
                                    ttpu_buffer* (*buffer_of)(void*, int),
                                    void* ctx, const ttpu_pad* pads);

#endif /* TTPU_PROG_PROGRAM_H_ */
