/* pool.c - compile threads: a FIFO of jobs, N workers, per-job results
 * (see pool.h for the rules). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pool.h"
#include "../base/env.h"

typedef enum { JOB_QUEUED, JOB_RUNNING, JOB_DONE } job_state;

struct ttpu_pool_job {
  /* The pool while the job is not done; NULL once done (a done job never
   * touches its pool again, so it may outlive it). */
  _Atomic(ttpu_pool*) pool;
  job_state state;          /* under the pool's mu */
  ttpu_pool_job* next;      /* the queue's link */
  /* what to do */
  ttpu_pjrt_client* client; /* compile jobs */
  char* text;
  size_t len;
  void* options;
  size_t options_len;
  ttpu_status* (*fn)(void*); /* function jobs */
  void* arg;
  /* results, written by the thread that ran it before it is done */
  ttpu_status* status;
  ttpu_pjrt_exec* exec;
  double seconds;
};

struct ttpu_pool {
  pthread_mutex_t mu;
  pthread_cond_t work;      /* a job was queued, or stop */
  pthread_cond_t done;      /* a job finished */
  ttpu_pool_job *head, *tail;
  int threads;              /* wanted */
  int started;              /* running workers */
  pthread_t* tids;
  int stop;
  pid_t pid;                /* the process that made the pool */
};

int ttpu_pool_default_threads(void) { return ttpu_env_usable_cores(); }

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs j on this thread (no lock held). */
static void run_job(ttpu_pool_job* j) {
  double t0 = now_seconds();
  if (j->fn)
    j->status = j->fn(j->arg);
  else
    j->status = ttpu_pjrt_compile(j->client, j->text, j->len, j->options,
                                  j->options_len, &j->exec);
  j->seconds = now_seconds() - t0;
}

static void* worker(void* arg) {
  ttpu_pool* p = arg;
  /* Named, so that top -H and a profiler tell the compile threads from
   * the caller's and the plugin's (a name is only a label: no error). */
  pthread_setname_np(pthread_self(), "ttpu_compile");
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->head && !p->stop) pthread_cond_wait(&p->work, &p->mu);
    if (!p->head) break; /* stop, and nothing left */
    ttpu_pool_job* j = p->head;
    p->head = j->next;
    if (!p->head) p->tail = NULL;
    j->next = NULL;
    j->state = JOB_RUNNING;
    pthread_mutex_unlock(&p->mu);
    run_job(j);
    pthread_mutex_lock(&p->mu);
    j->state = JOB_DONE;
    atomic_store(&j->pool, NULL);
    pthread_cond_broadcast(&p->done);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

ttpu_status* ttpu_pool_create(int threads, ttpu_pool** out) {
  *out = NULL;
  ttpu_pool* p = calloc(1, sizeof(*p));
  if (!p) return ttpu_status_oom();
  p->threads = threads > 0 ? threads : 0;
  if (p->threads) {
    p->tids = calloc((size_t)p->threads, sizeof(*p->tids));
    if (!p->tids) {
      free(p);
      return ttpu_status_oom();
    }
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->work, NULL);
  pthread_cond_init(&p->done, NULL);
  p->pid = getpid();
  *out = p;
  return NULL;
}

int ttpu_pool_started_threads(const ttpu_pool* p) {
  return p ? p->started : 0;
}

/* Starts the workers (under p->mu); returns how many run. */
static int start_locked(ttpu_pool* p) {
  while (p->started < p->threads) {
    if (pthread_create(&p->tids[p->started], NULL, worker, p) != 0) break;
    p->started++;
  }
  return p->started;
}

static ttpu_status* submit(ttpu_pool* p, ttpu_pool_job* j,
                           ttpu_pool_job** out) {
  int inline_run = !p || p->threads == 0 || p->pid != getpid();
  if (!inline_run) {
    pthread_mutex_lock(&p->mu);
    if (p->stop || !start_locked(p)) {
      inline_run = 1;
    } else {
      atomic_store(&j->pool, p);
      j->state = JOB_QUEUED;
      if (p->tail) p->tail->next = j;
      else p->head = j;
      p->tail = j;
      pthread_cond_signal(&p->work);
    }
    pthread_mutex_unlock(&p->mu);
  }
  if (inline_run) {
    run_job(j);
    j->state = JOB_DONE;
  }
  *out = j;
  return NULL;
}

ttpu_status* ttpu_pool_submit_compile(ttpu_pool* p, ttpu_pjrt_client* client,
                                      char* text, size_t len,
                                      const void* options, size_t options_len,
                                      ttpu_pool_job** out) {
  *out = NULL;
  ttpu_pool_job* j = calloc(1, sizeof(*j));
  void* opts = options && options_len ? malloc(options_len) : NULL;
  if (!j || (options && options_len && !opts)) {
    free(j);
    free(opts);
    free(text);
    return ttpu_status_oom();
  }
  if (opts) memcpy(opts, options, options_len);
  j->client = client;
  j->text = text;
  j->len = len;
  j->options = opts;
  j->options_len = opts ? options_len : 0;
  return submit(p, j, out);
}

ttpu_status* ttpu_pool_submit_fn(ttpu_pool* p, ttpu_status* (*fn)(void*),
                                 void* arg, ttpu_pool_job** out) {
  *out = NULL;
  ttpu_pool_job* j = calloc(1, sizeof(*j));
  if (!j) return ttpu_status_oom();
  j->fn = fn;
  j->arg = arg;
  return submit(p, j, out);
}

int ttpu_pool_job_done(ttpu_pool_job* j) {
  ttpu_pool* p = atomic_load(&j->pool);
  if (!p) return 1;
  pthread_mutex_lock(&p->mu);
  int done = j->state == JOB_DONE;
  pthread_mutex_unlock(&p->mu);
  return done;
}

void ttpu_pool_job_wait(ttpu_pool_job* j) {
  ttpu_pool* p = atomic_load(&j->pool);
  if (!p || p->pid != getpid()) return;
  pthread_mutex_lock(&p->mu);
  while (j->state != JOB_DONE) pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
}

const ttpu_status* ttpu_pool_job_status(const ttpu_pool_job* j) {
  return j->status;
}

ttpu_status* ttpu_pool_job_take_status(ttpu_pool_job* j) {
  ttpu_status* s = j->status;
  j->status = NULL;
  return s;
}

ttpu_pjrt_exec* ttpu_pool_job_take_exec(ttpu_pool_job* j) {
  ttpu_pjrt_exec* e = j->exec;
  j->exec = NULL;
  return e;
}

double ttpu_pool_job_seconds(const ttpu_pool_job* j) { return j->seconds; }

const char* ttpu_pool_job_text(const ttpu_pool_job* j, size_t* len) {
  if (len) *len = j->len;
  return j->text;
}

/* Takes j out of p's queue (under p->mu); 1 when it was there. */
static int unqueue_locked(ttpu_pool* p, ttpu_pool_job* j) {
  ttpu_pool_job* prev = NULL;
  for (ttpu_pool_job* q = p->head; q; prev = q, q = q->next) {
    if (q != j) continue;
    if (prev) prev->next = q->next;
    else p->head = q->next;
    if (p->tail == q) p->tail = prev;
    q->next = NULL;
    return 1;
  }
  return 0;
}

static ttpu_status* cancelled(void) {
  return ttpu_status_make(TTPU_FAILED_PRECONDITION,
                          "the compile was cancelled: its pool shut down "
                          "before it started");
}

void ttpu_pool_job_free(ttpu_pool_job* j) {
  if (!j) return;
  ttpu_pool* p = atomic_load(&j->pool);
  if (p && p->pid == getpid()) {
    pthread_mutex_lock(&p->mu);
    if (j->state == JOB_QUEUED && unqueue_locked(p, j)) {
      j->state = JOB_DONE;
      j->status = cancelled();
    }
    while (j->state != JOB_DONE) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
  }
  /* An executable made in a forked child's parent is not ours to destroy. */
  if (j->exec && (!p || p->pid == getpid()))
    ttpu_pjrt_exec_destroy(j->client, j->exec);
  ttpu_status_free(j->status);
  free(j->text);
  free(j->options);
  free(j);
}

void ttpu_pool_destroy(ttpu_pool* p) {
  if (!p) return;
  /* In a forked child the parent's threads do not exist and its lock may
   * be held: the pool is left as it is. */
  if (p->pid != getpid()) return;
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  while (p->head) {
    ttpu_pool_job* j = p->head;
    p->head = j->next;
    j->next = NULL;
    j->status = cancelled();
    j->state = JOB_DONE;
    atomic_store(&j->pool, NULL);
  }
  p->tail = NULL;
  pthread_cond_broadcast(&p->work);
  pthread_cond_broadcast(&p->done);
  pthread_mutex_unlock(&p->mu);
  for (int k = 0; k < p->started; ++k) pthread_join(p->tids[k], NULL);
  pthread_cond_destroy(&p->work);
  pthread_cond_destroy(&p->done);
  pthread_mutex_destroy(&p->mu);
  free(p->tids);
  free(p);
}
