/* log.c - the compile log: a ring of the last TTPU_LOG_CAP compiles. */
#include <stdio.h>
#include <stdlib.h>

#include "program.h"

void ttpu_prog_log_compile(ttpu_runtime* rt, const char* what, const char* reason,
                         double seconds, int from_disk, int n_ops) {
  if (!rt->log) {
    rt->log = calloc(TTPU_LOG_CAP, sizeof(*rt->log));
    if (!rt->log) return;
  }
  ttpu_compile_record* r = &rt->log[rt->n_log % TTPU_LOG_CAP];
  snprintf(r->what, sizeof(r->what), "%s", what);
  snprintf(r->reason, sizeof(r->reason), "%s", reason ? reason : "");
  r->seconds = seconds;
  r->from_disk = from_disk;
  r->n_ops = n_ops;
  rt->n_log++;
}

int ttpu_runtime_compile_log_count(ttpu_runtime* rt) {
  if (ttpu_rt_forked(rt)) return 0;
  pthread_mutex_lock(&rt->mu);
  int n = (int)(rt->n_log < TTPU_LOG_CAP ? rt->n_log : TTPU_LOG_CAP);
  pthread_mutex_unlock(&rt->mu);
  return n;
}

int ttpu_runtime_compile_log_get(ttpu_runtime* rt, int index,
                                 ttpu_compile_record* out) {
  if (ttpu_rt_forked(rt)) return 0;
  pthread_mutex_lock(&rt->mu);
  int64_t n = rt->n_log < TTPU_LOG_CAP ? rt->n_log : TTPU_LOG_CAP;
  int ok = index >= 0 && index < n && rt->log;
  if (ok) *out = rt->log[(rt->n_log - n + index) % TTPU_LOG_CAP];
  pthread_mutex_unlock(&rt->mu);
  return ok;
}

void ttpu_runtime_compile_log_clear(ttpu_runtime* rt) {
  if (ttpu_rt_forked(rt)) return;
  pthread_mutex_lock(&rt->mu);
  rt->n_log = 0;
  pthread_mutex_unlock(&rt->mu);
}
