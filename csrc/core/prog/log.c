/* log.c - the compile log: a ring of the last TTPU_LOG_CAP compiles. */
#include <stdio.h>
#include <stdlib.h>

#include "program.h"

void ttpu_prog_log_compile(ttpu_runtime* rt, const char* what, const char* reason,
                         double seconds, int from_disk, int n_ops) {
  ttpu_programs* pg = ttpu_rt_programs(rt);
  if (!pg->log) {
    pg->log = calloc(TTPU_LOG_CAP, sizeof(*pg->log));
    if (!pg->log) return;
  }
  ttpu_compile_record* r = &pg->log[pg->n_log % TTPU_LOG_CAP];
  snprintf(r->what, sizeof(r->what), "%s", what);
  snprintf(r->reason, sizeof(r->reason), "%s", reason ? reason : "");
  r->seconds = seconds;
  r->from_disk = from_disk;
  r->n_ops = n_ops;
  pg->n_log++;
}

int ttpu_runtime_compile_log_count(ttpu_runtime* rt) {
  ttpu_programs* pg = ttpu_rt_programs(rt);
  if (ttpu_rt_forked(rt)) return 0;
  ttpu_rt_lock(rt);
  int n = (int)(pg->n_log < TTPU_LOG_CAP ? pg->n_log : TTPU_LOG_CAP);
  ttpu_rt_unlock(rt);
  return n;
}

int ttpu_runtime_compile_log_get(ttpu_runtime* rt, int index,
                                 ttpu_compile_record* out) {
  ttpu_programs* pg = ttpu_rt_programs(rt);
  if (ttpu_rt_forked(rt)) return 0;
  ttpu_rt_lock(rt);
  int64_t n = pg->n_log < TTPU_LOG_CAP ? pg->n_log : TTPU_LOG_CAP;
  int ok = index >= 0 && index < n && pg->log;
  if (ok) *out = pg->log[(pg->n_log - n + index) % TTPU_LOG_CAP];
  ttpu_rt_unlock(rt);
  return ok;
}

void ttpu_runtime_compile_log_clear(ttpu_runtime* rt) {
  ttpu_programs* pg = ttpu_rt_programs(rt);
  if (ttpu_rt_forked(rt)) return;
  ttpu_rt_lock(rt);
  pg->n_log = 0;
  ttpu_rt_unlock(rt);
}
