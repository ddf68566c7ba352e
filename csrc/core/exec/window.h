/* window.h - the recorded window (internal to exec/, exec/window.c): op
 * calls recorded instead of run, planned against what the ops before them
 * leave in each storage, and run as one program at a boundary (a host
 * read, synchronize, the op limit, another device, the start of a
 * repeating step). Fused mode records into it; so does a graph, as the
 * window's owner for as long as the graph is open.
 *
 * Threads: everything here is called under rt->mu. */
#ifndef TTPU_EXEC_WINDOW_H_
#define TTPU_EXEC_WINDOW_H_

#include "runtime.h"
#include "../prog/program.h"

/* Who records into the window other than fused mode: a graph. While an
 * owner is set the window is one program however long (no op limit, no
 * repeat cuts, fills recorded like any op), its program is labelled
 * "graph NAME (N ops)", and the owner hears of each program. */
typedef struct ttpu_window_owner {
  void* user;
  const char* name;
  /* A program of the window ran or joined the compile queue. */
  void (*ran)(void* user);
  /* Whether the next program is to be captured for replay. */
  int (*wants_capture)(void* user);
  /* Captures program g of window w (entry e, or NULL while it compiles:
   * then found by key at the first replay), taking the pack buffers; the
   * result, or NULL, goes to captured, with kept 0 when the program never
   * ran (the capture is to be freed). */
  void* (*capture)(void* user, const ttpu_window* w, const ttpu_prog* g,
                   ttpu_cache_entry* e, const int64_t* key, size_t n_key,
                   ttpu_pjrt_buffer* fbuf, ttpu_pjrt_buffer* ibuf);
  void (*captured)(void* user, void* replay, int kept);
  /* Set: the window's ops are a function's body (exec/function.c), never
   * run: whatever would run them (a host read, synchronize) fails. */
  int never_run;
} ttpu_window_owner;

/* Adds the call as the window's next op (a fill of a storage the window
 * has not seen runs first, on its own, in fused mode). */
ttpu_status* ttpu_window_record(ttpu_runtime* rt, const ttpu_op_call* call,
                                const ttpu_op_def* def);
/* Runs the window's ops as one program; why: what ended them. */
ttpu_status* ttpu_window_flush(ttpu_runtime* rt, ttpu_window_end why);
/* Runs the window when b's read (writing 0) or write needs it. */
ttpu_status* ttpu_window_touch(ttpu_runtime* rt, const ttpu_buffer* b,
                               int writing);
/* A host read of b ends the window whatever b depends on: the host waits
 * at a step's end or for a value, and the ops recorded so far start. (A
 * training loop that reads its loss then runs its update as a window of
 * its own, not as the head of the next step's forward.) */
ttpu_status* ttpu_window_host_read(ttpu_runtime* rt, const ttpu_buffer* b);
/* Sets the owner (borrowed until set again), or NULL: fused mode. */
ttpu_status* ttpu_window_set_owner(ttpu_runtime* rt,
                                   const ttpu_window_owner* owner);
/* Frees the window, at ttpu_runtime_destroy. */
void ttpu_window_destroy(ttpu_runtime* rt);

/* The window's ops as the program of a function (exec/function.c), lowered
 * and not run; the window is emptied either way. Its parameters are the
 * storages the ops read before writing them, in the window's order, then
 * the scalar packs; its results are outs[0..n_out), storages the ops
 * write, in that order, and nothing else. Refused: ops that draw random
 * numbers, that write a storage they read first (an input changed in
 * place), that check data at run time, or padded storages. */
typedef struct {
  char* text;               /* the program (its function is main) */
  size_t len;
  int n_params;
  ttpu_buffer** param_buf;  /* per parameter: its storage (only to compare
                               with; not retained), NULL for a pack */
  ttpu_prog_store* param;   /* per parameter: its dtype and dims */
  int f_param, i_param;     /* the packs' parameters, or -1 */
  int n_f, n_i;
  double* f;                /* the packs' values at the recording */
  int64_t* i;
  int n_results;
  ttpu_result_plan* results; /* per result: its dtype and dims */
} ttpu_window_function;
ttpu_status* ttpu_window_lower_function(ttpu_runtime* rt,
                                        ttpu_buffer* const* outs, int n_out,
                                        ttpu_window_function* fn);
void ttpu_window_function_free(ttpu_window_function* fn);

/* How store k was padded (prog/bucket.c) at the window's start and is at
 * its end: a graph's replay over padded storages holds the true sizes of
 * its recording, so it runs only where they are the same. */
void ttpu_window_store_pads(const ttpu_window* w, int k, ttpu_pad* pad0,
                            ttpu_pad* pad);

/* The window's storages, for a graph's capture: how many, and storage k
 * with whether it held a value when the window began. */
int ttpu_window_store_count(const ttpu_window* w);
ttpu_buffer* ttpu_window_store(const ttpu_window* w, int k, int* has_value0);
int ttpu_window_op_count(const ttpu_window* w);
int ttpu_window_device(const ttpu_window* w);

#endif /* TTPU_EXEC_WINDOW_H_ */
