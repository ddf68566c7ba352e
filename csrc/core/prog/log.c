/* log.c - the compile log (a ring of the last TTPU_LOG_CAP compiles) and
 * the program layer's warnings. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "plan.h"
#include "program.h"

void ttpu_prog_log_compile(ttpu_prog_ctx* pc, const char* what,
                           const char* reason, double seconds, int from_disk,
                           int n_ops) {
  if (!pc->log) {
    pc->log = calloc(TTPU_LOG_CAP, sizeof(*pc->log));
    if (!pc->log) return;
  }
  ttpu_compile_record* r = &pc->log[pc->n_log % TTPU_LOG_CAP];
  snprintf(r->what, sizeof(r->what), "%s", what);
  snprintf(r->reason, sizeof(r->reason), "%s", reason ? reason : "");
  r->seconds = seconds;
  r->from_disk = from_disk;
  r->n_ops = n_ops;
  pc->n_log++;
}

int ttpu_prog_log_count(const ttpu_prog_ctx* pc) {
  return (int)(pc->n_log < TTPU_LOG_CAP ? pc->n_log : TTPU_LOG_CAP);
}

int ttpu_prog_log_get(const ttpu_prog_ctx* pc, int index,
                      ttpu_compile_record* out) {
  int64_t n = pc->n_log < TTPU_LOG_CAP ? pc->n_log : TTPU_LOG_CAP;
  if (index < 0 || index >= n || !pc->log) return 0;
  *out = pc->log[(pc->n_log - n + index) % TTPU_LOG_CAP];
  return 1;
}

void ttpu_prog_log_clear(ttpu_prog_ctx* pc) { pc->n_log = 0; }

void ttpu_prog_warn(ttpu_prog_ctx* pc, const char* fmt, ...) {
  if (!pc->hooks.warn) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  pc->hooks.warn(pc->hooks.host, msg);
}

void ttpu_prog_ctx_free_state(ttpu_prog_ctx* pc) {
  ttpu_plan_free_last_sigs(pc);
  free(pc->growth);
  pc->growth = NULL;
  free(pc->sweep);
  pc->sweep = NULL;
  free(pc->moving);
  pc->moving = NULL;
  free(pc->log);
  pc->log = NULL;
  pc->n_log = 0;
  ttpu_prog_texts_free(pc);
}
