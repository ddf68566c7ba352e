/* hlo_control.c - structured control flow: stablehlo.while.
 *
 * Iterative algorithms (Jacobi sweeps, repeated squaring) loop at run time
 * instead of being unrolled: the program text, and so its compile time,
 * stays the size of one iteration whatever the trip count. */
#include <stdlib.h>

#include "hlo_internal.h"
#include "ttpu_hlo.h"

/* A scan's loop carries every stacked input and output of its body. */
enum { kMaxLoopState = 256 };

void ttpu_hlo_while(ttpu_hlo* b, const ttpu_val* init, int n,
                    ttpu_hlo_while_cond cond, ttpu_hlo_while_body body,
                    void* ctx, ttpu_val* outs) {
  for (int i = 0; i < n; i++) outs[i] = TTPU_VAL_ERROR;
  if (ttpu_hloi_failed(b)) return;
  if (n < 1 || n > kMaxLoopState) {
    ttpu_hlo_fail(b, TTPU_INTERNAL, "while: %d state values (1..%d)", n,
                  kMaxLoopState);
    return;
  }
  /* Types by value: adding values may move the builder's type storage. */
  ttpu_type types[kMaxLoopState];
  for (int i = 0; i < n; i++) {
    const ttpu_type* t = ttpu_hloi_check(b, init[i], "while");
    if (!t) return;
    types[i] = *t;
  }
  ttpu_val args[kMaxLoopState], next[kMaxLoopState];

  ttpu_hloi_region_begin(b, types, n, args);
  ttpu_val pred = ttpu_hloi_failed(b) ? TTPU_VAL_ERROR : cond(b, ctx, args);
  const ttpu_type* pt = ttpu_hloi_check(b, pred, "while condition");
  if (pt && (pt->dtype != TTPU_BOOL || pt->ndim != 0))
    ttpu_hlo_fail(b, TTPU_INTERNAL, "while: the condition is not a 0-d bool");
  char* cond_text = ttpu_hloi_region_end(b, &pred, 1);

  ttpu_hloi_region_begin(b, types, n, args);
  for (int i = 0; i < n; i++) next[i] = TTPU_VAL_ERROR;
  if (!ttpu_hloi_failed(b)) body(b, ctx, args, next);
  for (int i = 0; i < n && !ttpu_hloi_failed(b); i++) {
    const ttpu_type* t = ttpu_hloi_check(b, next[i], "while body");
    if (t && !ttpu_hloi_same_type(t, &types[i]))
      ttpu_hlo_fail(b, TTPU_INTERNAL,
                    "while: state value %d changes type in the body", i);
  }
  char* body_text = ttpu_hloi_region_end(b, next, n);

  if (cond_text && body_text) {
    ttpu_hloi_buf regions = {0};
    ttpu_hloi_buf_put(&regions, "(");
    ttpu_hloi_buf_put(&regions, cond_text);
    ttpu_hloi_buf_put(&regions, ", ");
    ttpu_hloi_buf_put(&regions, body_text);
    ttpu_hloi_buf_put(&regions, ")");
    char* text = ttpu_hloi_buf_take(&regions);
    if (text)
      ttpu_hloi_emit(b, "stablehlo.while", init, n, text, NULL, types, n,
                     outs);
    else
      ttpu_hlo_fail(b, TTPU_RESOURCE_EXHAUSTED, "while: oom");
    free(text);
  }
  free(cond_text);
  free(body_text);
}
