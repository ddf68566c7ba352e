/* ttpu_lower_ctx.h - running one op call's lowering (ops/lower.c): the
 * interface between the op table and whatever frames a program around the
 * call (prog/assemble.c; a C test that lowers an op to text with no
 * runtime).
 *
 * The framer owns the builder and everything outside the op: parameters,
 * where the call's tensors' data comes from, write-backs. The lowering
 * context owns the op: it answers the record's ttpu_l_* questions, runs
 * the record's lowering (its complex lowering for complex values), and
 * hands back the outputs, the advanced rng state and the data-dependent
 * check. It never sees storages or plans: the value of an input tensor is
 * asked of the framer through read_input, once per tensor, at the moment a
 * lowering first reads it (so the program text is the same whatever the
 * framer does in between).
 *
 *   ttpu_lower_setup su = {.read_input = my_read, .user = me, ...};
 *   ttpu_lower* L;
 *   s = ttpu_lower_begin(b, ttpu_op_def_get(call->op), call, &su, &L);
 *   if (!s) s = ttpu_lower_run(L);
 *   ... ttpu_lower_output(L, k) for each output ...
 *   ttpu_lower_end(L);
 *
 * Not thread-safe: a context and its builder belong to one thread. */
#ifndef TTPU_LOWER_CTX_H_
#define TTPU_LOWER_CTX_H_

#include "ttpu_lower.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the framer gives one op call's lowering. Pointers a call does not
 * use may be NULL (arg_scalar: a call without Scalar arguments); a val it
 * does not have is TTPU_VAL_ERROR, never 0 (a value id). */
typedef struct {
  /* The logical value (the view's sizes and dtype) of call->tensors[tensor],
   * a tensor with a buffer; a tensor without one (None, empty) never gets
   * here. Called at most once per tensor, while L's lowering runs. L is the
   * asking context, for ttpu_lower_int_scalar. TTPU_VAL_ERROR after an
   * error set in the builder. */
  ttpu_val (*read_input)(void* user, ttpu_lower* L, int tensor);
  void* user;
  /* The program's runtime scalar packs: a 1-d f64 and a 1-d i64 value
   * (TTPU_VAL_ERROR: none). */
  ttpu_val fpack, ipack;
  /* Per call argument: a runtime Scalar's index among the call's float
   * (float or complex Scalar: re, then im) or int scalars, -1 for a Scalar
   * that is a compile-time value (TTPU_OP_STATIC_SCALARS); a Scalar list's
   * first entry in list_at, whose entries are float-scalar indices. Other
   * arguments' entries are not read. */
  const int* arg_scalar;
  const int* list_at;
  /* Where the call's float scalar j is in fpack: f_map[j], or f_off + j
   * when f_map is NULL (a fused window gathers several calls' scalars into
   * one pack); i_map/i_off the same for its int scalars in ipack. */
  const int* f_map;
  const int* i_map;
  int f_off, i_off;
  /* The device's rng state (u64[2]) before the call, for TTPU_OP_RANDOM
   * records (TTPU_VAL_ERROR: none; drawing then fails). */
  ttpu_val rng_state;
  /* A bucketed call (prog/bucket.c): per call tensor, the view dims that
   * hold a bucket (NULL: the call is not bucketed), and then the index of
   * their true size among the call's int scalars; per output, the dims
   * that hold it (NULL where the call is not bucketed). */
  const int* tensor_dyn;
  int dyn_at;
  const int* out_dyn;
} ttpu_lower_setup;

/* A context for lowering `call` (whose record is def) into b. *setup is
 * copied; the arrays it points to, call and b are borrowed until
 * ttpu_lower_end. */
ttpu_status* ttpu_lower_begin(ttpu_hlo* b, const ttpu_op_def* def,
                              const ttpu_op_call* call,
                              const ttpu_lower_setup* setup, ttpu_lower** out);
/* Runs the lowering: the call's refusal first (ttpu_op_refusal), then the
 * record's lowering, or its complex one for a call with complex values.
 * On success every output with a buffer has a value of its sizes (its
 * dtype may still differ: converting is the framer's). Caller owns the
 * status. Run once per context. */
ttpu_status* ttpu_lower_run(ttpu_lower* L);
/* Output k's value as the lowering set it (TTPU_VAL_ERROR: not set; only
 * an output without a buffer may be unset after a successful run). */
ttpu_val ttpu_lower_output(const ttpu_lower* L, int k);
/* The call's int scalar j (an index as in ttpu_lower_setup.i_map) as a
 * 0-d i64 value read out of ipack: how a framer reads the run-time offsets
 * it put among the call's int scalars. */
ttpu_val ttpu_lower_int_scalar(ttpu_lower* L, int j);
/* The rng state after the call's draws (setup's when it drew none). */
ttpu_val ttpu_lower_rng_state(const ttpu_lower* L);
/* The call's data-dependent check (ttpu_l_check): its info value, with
 * *code and *fmt (L's, valid until ttpu_lower_end; shorter than
 * TTPU_L_CHECK_FMT_MAX), or TTPU_VAL_ERROR when the lowering set none. */
ttpu_val ttpu_lower_check(const ttpu_lower* L, ttpu_code* code,
                          const char** fmt);
/* Frees L (not the builder). NULL is a no-op. */
void ttpu_lower_end(ttpu_lower* L);

#ifdef __cplusplus
}
#endif

#endif /* TTPU_LOWER_CTX_H_ */
