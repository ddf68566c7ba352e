/* runtime.c - the registry object: plugin, client, per-device state, and
 * the storage objects (ttpu_buffer) that PyTorch's storages point at. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "executor.h"
#include "ttpu_aot.h"
#include "../cache/cache.h"
#include "../prog/plan.h"
#include "../prog/program.h"
#include "../base/env.h"
#include "../base/heap.h"

/* ------------------------------------------------------------ fork */

/* Process-wide by nature (a fork happens to the process, not to one
 * runtime): how many fork()s separate this process from the one that
 * started. A runtime records it at creation; a
 * forked child sees a newer generation and refuses to touch the runtime
 * (its plugin's threads were not copied, and a lock held by another thread
 * at fork() stays held forever), as CUDA does. */
static atomic_int fork_generation;
static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void) { atomic_fetch_add(&fork_generation, 1); }
static void install_fork_handler(void) {
  pthread_atfork(NULL, NULL, on_fork_child);
}

int ttpu_rt_forked(const ttpu_runtime* rt) {
  return atomic_load_explicit(&fork_generation, memory_order_relaxed) !=
         rt->fork_generation;
}

ttpu_status* ttpu_rt_check_fork(const ttpu_runtime* rt) {
  if (!ttpu_rt_forked(rt)) return NULL;
  return ttpu_status_make(
        TTPU_FAILED_PRECONDITION,
        "the tpu runtime cannot be used in a forked child process: it was "
        "started in the parent before fork(). To use tpu in subprocesses, "
        "use the 'spawn' start method (multiprocessing.set_start_method("
        "'spawn') or torch.multiprocessing.spawn); CPU-only work in forked "
        "workers (DataLoader) is unaffected");
}

ttpu_prog_ctx* ttpu_rt_prog(ttpu_runtime* rt) { return &rt->prog; }
ttpu_pjrt_client* ttpu_rt_client(const ttpu_runtime* rt) { return rt->client; }
const ttpu_runtime_options* ttpu_rt_options(const ttpu_runtime* rt) {
  return &rt->opts;
}
ttpu_stats* ttpu_rt_stats(ttpu_runtime* rt, int device) {
  return &rt->dev[device].stats;
}
ttpu_buffer* ttpu_rt_rng_state(ttpu_runtime* rt, int device) {
  return rt->dev[device].rng_state;
}
ttpu_mode ttpu_rt_mode(const ttpu_runtime* rt) { return rt->mode; }
void ttpu_rt_lock(ttpu_runtime* rt) { pthread_mutex_lock(&rt->mu); }
void ttpu_rt_unlock(ttpu_runtime* rt) { pthread_mutex_unlock(&rt->mu); }

ttpu_status* ttpu_rt_enter(ttpu_runtime* rt) {
  ttpu_status* s = ttpu_rt_check_fork(rt);
  if (!s) pthread_mutex_lock(&rt->mu);
  return s;
}

/* ------------------------------------------------------ program context */

static void prog_warn(void* host, const char* message) {
  ttpu_rt_warn(host, "%s", message);
}
static void prog_compile_begin(void* host, int device, const char* what,
                               int n_ops) {
  ttpu_rt_trace_compile_begin(host, device, what, n_ops);
}
static void prog_compile_end(void* host, int device, const char* what,
                             int n_ops, int from_disk, int failed) {
  ttpu_rt_trace_compile_end(host, device, what, n_ops, from_disk, failed);
}
static ttpu_buffer* prog_rng_state(void* host, int device) {
  return ttpu_rt_rng_state(host, device);
}
static void prog_drop_buffer(void* host, ttpu_pjrt_buffer* pb) {
  ttpu_rt_drop_pjrt(host, pb);
}
static int prog_keep_check(void* host, int device, const ttpu_result_plan* rp,
                           ttpu_pjrt_buffer* pb);

/* What the program layer gets from the runtime, handed down once: it
 * never reaches up for any of it. */
static void prog_context_init(ttpu_runtime* rt) {
  ttpu_prog_ctx* pc = &rt->prog;
  pc->client = rt->client;
  pc->opts = &rt->opts;
  pc->owner = rt;
  pc->n_devices = rt->device_count;
  /* bucket_min and bucket_ladder: read (and checked) by
   * ttpu_runtime_create */
  pc->bucket_poison = ttpu_env_bucket_poison();
  for (int d = 0; d < TTPU_MAX_DEVICES; ++d) pc->stats[d] = &rt->dev[d].stats;
  pc->hooks = (ttpu_prog_hooks){.host = rt,
                                .warn = prog_warn,
                                .compile_begin = prog_compile_begin,
                                .compile_end = prog_compile_end,
                                .rng_state = prog_rng_state,
                                .drop_buffer = prog_drop_buffer,
                                .keep_check = prog_keep_check};
}

/* ------------------------------------------------------------ programs */

struct ttpu_retired {
  ttpu_pjrt_exec* exec;
  int64_t last_run;
};

/* Every execution with a ticket below this has completed: the pending
 * list holds the unfinished ones in ticket order. */
static int64_t completed_below(const ttpu_runtime* rt) {
  return rt->n_pending ? rt->pending_ticket[0] : rt->exec_ticket + 1;
}

/* Keeps s as the asynchronous error synchronize reports, unless an older
 * one is waiting already (under rt->mu; s may be NULL). */
static void keep_async_error(ttpu_runtime* rt, ttpu_status* s) {
  if (s && !rt->async_error) rt->async_error = s;
  else ttpu_status_free(s);
}

struct ttpu_dropped {
  ttpu_pjrt_buffer* pb;
  int64_t ticket; /* the last execution enqueued when it was dropped */
};

/* Every execution with a ticket below this has completed, as far as the
 * device has got: the ticket of the first pending event not ready yet.
 * The pending list is left as it is (under rt->mu). */
static int64_t ready_below(const ttpu_runtime* rt) {
  for (int i = 0; i < rt->n_pending; ++i)
    if (!ttpu_pjrt_event_is_ready(rt->client, rt->pending[i]))
      return rt->pending_ticket[i];
  return rt->exec_ticket + 1;
}

/* Destroys the dropped buffers whose executions all have tickets below
 * done (ready_below). */
static void reap_dropped_below(ttpu_runtime* rt, int64_t done) {
  while (rt->n_dropped && rt->dropped[rt->dropped_head].ticket < done) {
    ttpu_pjrt_buffer_destroy(rt->client, rt->dropped[rt->dropped_head].pb);
    rt->dropped_head++;
    rt->n_dropped--;
  }
  if (!rt->n_dropped) rt->dropped_head = 0;
}

static void reap_dropped(ttpu_runtime* rt) {
  if (rt->n_dropped) reap_dropped_below(rt, ready_below(rt));
}

void ttpu_rt_drop_pjrt(ttpu_runtime* rt, ttpu_pjrt_buffer* pb) {
  if (!pb) return;
  int64_t done = ready_below(rt);
  reap_dropped_below(rt, done);
  if (!rt->n_dropped && done > rt->exec_ticket) {
    ttpu_pjrt_buffer_destroy(rt->client, pb);
    return;
  }
  if (rt->dropped_head + rt->n_dropped == rt->cap_dropped) {
    if (rt->dropped_head) {
      memmove(rt->dropped, rt->dropped + rt->dropped_head,
              (size_t)rt->n_dropped * sizeof(*rt->dropped));
      rt->dropped_head = 0;
    } else {
      int cap = rt->cap_dropped ? rt->cap_dropped * 2 : 64;
      struct ttpu_dropped* d = realloc(rt->dropped, (size_t)cap * sizeof(*d));
      if (!d) {
        /* Out of host memory: destroy it now, waiting if it must. */
        ttpu_pjrt_buffer_destroy(rt->client, pb);
        return;
      }
      rt->dropped = d;
      rt->cap_dropped = cap;
    }
  }
  rt->dropped[rt->dropped_head + rt->n_dropped].pb = pb;
  rt->dropped[rt->dropped_head + rt->n_dropped].ticket = rt->exec_ticket;
  rt->n_dropped++;
}

/* ------------------------------------------------------------ kept checks */

struct ttpu_kept_check {
  int device;
  ttpu_pjrt_buffer* pb;
  ttpu_result_plan plan; /* a copy: the program may be evicted meanwhile */
};

/* Most checks kept unread: a loop that never reads reads the oldest half
 * once this many wait, so their buffers do not pile up. */
#define KEPT_CHECKS_MAX 64

/* Reads the oldest n kept checks (waiting for their programs), keeping
 * the first error that fired in check_error. */
static void read_checks(ttpu_runtime* rt, int n) {
  for (int k = 0; k < n; ++k) {
    struct ttpu_kept_check* c = &rt->checks[k];
    ttpu_status* e = rt->check_error
                         ? NULL
                         : ttpu_prog_read_check(&rt->prog, c->device, &c->plan,
                                                c->pb);
    if (e) rt->check_error = e;
    ttpu_pjrt_buffer_destroy(rt->client, c->pb);
  }
  rt->n_checks -= n;
  memmove(rt->checks, rt->checks + n, (size_t)rt->n_checks * sizeof(*rt->checks));
}

static int prog_keep_check(void* host, int device, const ttpu_result_plan* rp,
                           ttpu_pjrt_buffer* pb) {
  ttpu_runtime* rt = host;
  if (rt->n_checks == KEPT_CHECKS_MAX) read_checks(rt, KEPT_CHECKS_MAX / 2);
  if (rt->n_checks == rt->cap_checks) {
    int cap = rt->cap_checks ? rt->cap_checks * 2 : 8;
    struct ttpu_kept_check* c = realloc(rt->checks, (size_t)cap * sizeof(*c));
    if (!c) return 0; /* read at once instead */
    rt->checks = c;
    rt->cap_checks = cap;
  }
  struct ttpu_kept_check* c = &rt->checks[rt->n_checks++];
  c->device = device;
  c->pb = pb;
  c->plan = *rp;
  return 1;
}

ttpu_status* ttpu_rt_take_checks(ttpu_runtime* rt, ttpu_status* s) {
  if (rt->n_checks) read_checks(rt, rt->n_checks);
  if (!rt->check_error) return s;
  ttpu_status_free(s);
  s = rt->check_error;
  rt->check_error = NULL;
  return s;
}

static void reap_retired(ttpu_runtime* rt) {
  reap_dropped(rt);
  if (!rt->n_retired) return;
  int64_t done = completed_below(rt);
  int keep = 0;
  for (int i = 0; i < rt->n_retired; ++i) {
    if (rt->retired[i].last_run < done)
      ttpu_pjrt_exec_destroy(rt->client, rt->retired[i].exec);
    else
      rt->retired[keep++] = rt->retired[i];
  }
  rt->n_retired = keep;
}

static void await_all_locked(ttpu_runtime* rt);


/* The cache evicted e (under rt->mu): its executable goes now, or once
 * the executions that may still use it have finished. */
static void retire_program(void* ctx, ttpu_cache_entry* e) {
  ttpu_runtime* rt = ctx;
  free(e->results);
  if (!e->exec) return;
  if (e->last_run < completed_below(rt)) {
    ttpu_pjrt_exec_destroy(rt->client, e->exec);
    return;
  }
  if (rt->n_retired == rt->cap_retired) {
    int cap = rt->cap_retired ? rt->cap_retired * 2 : 16;
    struct ttpu_retired* r = realloc(rt->retired, (size_t)cap * sizeof(*r));
    if (!r) {
      /* Out of host memory: wait for the device rather than leak. */
      await_all_locked(rt);
      ttpu_pjrt_exec_destroy(rt->client, e->exec);
      return;
    }
    rt->retired = r;
    rt->cap_retired = cap;
  }
  rt->retired[rt->n_retired].exec = e->exec;
  rt->retired[rt->n_retired].last_run = e->last_run;
  rt->n_retired++;
}

void ttpu_runtime_set_program_cache_size(ttpu_runtime* rt, int64_t n) {
  if (ttpu_rt_forked(rt)) return;
  pthread_mutex_lock(&rt->mu);
  ttpu_cache_set_capacity(rt->prog.cache, n > 0 ? (size_t)n : 0);
  pthread_mutex_unlock(&rt->mu);
}

int64_t ttpu_runtime_program_cache_size(ttpu_runtime* rt) {
  return (int64_t)ttpu_cache_capacity(rt->prog.cache);
}

/* The options a runtime runs with: the caller's, with every field it did
 * not set taken from the environment; strings duplicated into rt. */
static int resolve_options(const ttpu_runtime_options* in,
                           ttpu_runtime_options* out) {
  ttpu_runtime_options env;
  ttpu_runtime_options_from_env(&env);
  if (in && in->initialized == TTPU_OPTIONS_FROM_ENV) *out = *in;
  else *out = env;
  out->initialized = TTPU_OPTIONS_FROM_ENV;
  out->plugin_path = NULL;
  out->search_dirs = NULL;
  if (in) {
    out->cpu_device_count = in->cpu_device_count;
    /* 0 keeps its old meaning even in a from_env struct: the default. */
    out->program_cache_size = in->program_cache_size
                                  ? in->program_cache_size
                                  : env.program_cache_size;
  }
  char* dump = out->dump_dir ? strdup(out->dump_dir) : NULL;
  char* dir = out->cache_dir ? strdup(out->cache_dir) : NULL;
  out->dump_dir = dump;
  out->cache_dir = dir;
  return (out->dump_dir && !dump) || (out->cache_dir && !dir);
}

static void free_options(ttpu_runtime_options* o) {
  free((char*)o->dump_dir);
  free((char*)o->cache_dir);
  o->dump_dir = o->cache_dir = NULL;
}

/* The disk cache's namespace for this runtime's plugin and client. */
static ttpu_disk_namespace disk_namespace(const ttpu_runtime* rt) {
  ttpu_disk_namespace ns;
  int major = 0, minor = 0;
  ttpu_pjrt_plugin_version(rt->plugin, &major, &minor);
  ttpu_disk_namespace_make(ttpu_pjrt_client_platform_name(rt->client),
                           ttpu_pjrt_client_platform_version(rt->client),
                           major, minor, ttpu_pjrt_client_options_id(rt->client),
                           ttpu_pjrt_client_caps(rt->client)->host_code, &ns);
  return ns;
}

ttpu_status* ttpu_runtime_create(const ttpu_runtime_options* options,
                                 ttpu_runtime** out) {
  *out = NULL;
  const char* path = options ? options->plugin_path : NULL;
  char* found = NULL;
  ttpu_status* s = NULL;
  if (!path || !*path) {
    s = ttpu_plugin_find(options ? options->search_dirs : NULL, &found);
    if (s) return s;
    path = found;
  }
  ttpu_runtime_options opts;
  if (resolve_options(options, &opts)) {
    free_options(&opts);
    free(found);
    return ttpu_status_oom();
  }
  int64_t programs = opts.program_cache_size;
  if (programs < 0) {
    free_options(&opts);
    free(found);
    return ttpu_env_invalid_program_cache_size();
  }
  ttpu_runtime* rt = calloc(1, sizeof(*rt));
  if (!rt) {
    free_options(&opts);
    free(found);
    return ttpu_status_oom();
  }
  rt->opts = opts;
  rt->exec = &ttpu_executor_strict;
  pthread_once(&fork_handler_once, install_fork_handler);
  rt->fork_generation = atomic_load(&fork_generation);
  pthread_mutex_init(&rt->mu, NULL);
  pthread_mutex_init(&rt->event_mu, NULL);
  pthread_cond_init(&rt->event_cv, NULL);
  s = ttpu_pjrt_plugin_load(path, &rt->plugin);
  free(found);
  if (s) goto fail;
  int count = rt->opts.cpu_device_count > 0 ? rt->opts.cpu_device_count : 1;
  s = ttpu_pjrt_client_create(rt->plugin, count, &rt->client);
  if (s) goto fail;
  _Static_assert(sizeof rt->prog.bucket_sizes / sizeof(int64_t) == TTPU_ENV_MAX_BUCKETS,
                 "explicit bucket sizes");
  s = ttpu_env_buckets(&rt->prog.bucket_min, &rt->prog.bucket_ladder,
                       rt->prog.bucket_sizes, &rt->prog.n_bucket_sizes);
  if (s) goto fail;
  if (ttpu_pjrt_client_caps(rt->client)->host_code) {
    s = rt->opts.cpu_opt_level < -1
            ? ttpu_env_invalid_cpu_opt_level()
            : ttpu_pjrt_client_set_opt_level(rt->client, rt->opts.cpu_opt_level);
    if (!s)
      s = rt->opts.cpu_small_program_elements < 0
              ? ttpu_env_invalid_cpu_small_program_elements()
              : ttpu_pjrt_client_set_small_programs(
                    rt->client, rt->opts.cpu_small_program_elements);
    if (s) goto fail;
    ttpu_heap_keep_freed();
  }
  rt->device_count = ttpu_pjrt_client_device_count(rt->client);
  if (rt->device_count > TTPU_MAX_DEVICES) rt->device_count = TTPU_MAX_DEVICES;
  prog_context_init(rt);
  s = ttpu_cache_create((size_t)programs, retire_program, rt, &rt->prog.cache);
  if (s) goto fail;
  ttpu_mode mode = rt->opts.mode;
  if (ttpu_executor_for_mode(mode)) {
    rt->mode = mode;
    rt->exec = ttpu_executor_for_mode(mode);
  } else {
    s = mode == (ttpu_mode)-1
            ? ttpu_env_invalid_mode()
            : ttpu_status_make(TTPU_INVALID_ARGUMENT, "unknown eager mode %d",
                               (int)mode);
    goto fail;
  }
  /* The persistent cache is an optimization: a directory we cannot use
   * leaves it off rather than failing the runtime, with a warning. */
  if (rt->opts.disk_cache && rt->opts.cache_dir && *rt->opts.cache_dir) {
    ttpu_disk_namespace ns = disk_namespace(rt);
    ttpu_status* disk = ttpu_disk_open(&ns, rt->opts.cache_dir,
                                       rt->opts.cache_max_bytes, &rt->prog.disk);
    if (disk)
      ttpu_rt_warn(rt,
                   "torchtpu: the persistent compile cache is off: %s; "
                   "programs compile as usual (TORCHTPU_CACHE_DIR chooses "
                   "another directory, TORCHTPU_DISK_CACHE=0 silences this)",
                   ttpu_status_message(disk));
    ttpu_status_free(disk);
  }
  for (int d = 0; d < rt->device_count; ++d) {
    s = ttpu_runtime_manual_seed(rt, d, 67280421310721ull);
    if (s) goto fail;
  }
  *out = rt;
  return NULL;
fail:
  ttpu_runtime_destroy(rt);
  return s;
}

ttpu_status* ttpu_runtime_set_cache_dir(ttpu_runtime* rt, const char* dir,
                                        int64_t max_bytes) {
  ttpu_status* s = ttpu_rt_enter(rt);
  if (s) return s;
  ttpu_disk_close(rt->prog.disk);
  rt->prog.disk = NULL;
  if (dir && *dir) {
    ttpu_disk_namespace ns = disk_namespace(rt);
    s = ttpu_disk_open(&ns, dir, max_bytes, &rt->prog.disk);
  }
  pthread_mutex_unlock(&rt->mu);
  return s;
}

const char* ttpu_runtime_cache_dir(ttpu_runtime* rt) {
  return rt->prog.disk ? ttpu_disk_root(rt->prog.disk) : "";
}

void ttpu_runtime_caps(const ttpu_runtime* rt, ttpu_caps* out) {
  const ttpu_pjrt_caps* c = ttpu_pjrt_client_caps(rt->client);
  out->serialize_executables = c->serialize_executables;
  out->topology_compile = c->topology_compile;
  out->memory_stats = c->memory_stats;
  out->cost_analysis = c->cost_analysis;
  out->cross_process_collectives = c->cross_process_collectives;
  out->host_code = c->host_code;
  out->host_access = c->host_pointers;
}

void ttpu_runtime_destroy(ttpu_runtime* rt) {
  if (!rt) return;
  /* A forked child must not call into the plugin: the runtime is the
   * parent's, and the child leaves it be. */
  if (ttpu_rt_forked(rt)) return;
  if (rt->client) {
    ttpu_status_free(ttpu_runtime_synchronize(rt, -1));
    ttpu_executors_destroy(rt);
    for (int d = 0; d < rt->device_count; ++d) {
      if (rt->dev[d].rng_state) ttpu_buffer_release(rt->dev[d].rng_state);
      ttpu_event_release(rt->dev[d].last_event);
    }
    if (rt->prog.cache) ttpu_cache_destroy(rt->prog.cache, rt->client);
    reap_retired(rt); /* everything ran: synchronize awaited it */
    ttpu_pjrt_client_destroy(rt->client);
  }
  /* Frees our plugin object; the library itself stays mapped (the loader
   * opens it RTLD_NODELETE: PJRT plugins cannot be unloaded safely). */
  if (rt->plugin) ttpu_pjrt_plugin_unload(rt->plugin);
  ttpu_prog_ctx_free_state(&rt->prog);
  ttpu_disk_close(rt->prog.disk);
  free(rt->pending);
  free(rt->pending_device);
  free(rt->pending_ticket);
  free(rt->retired);
  free(rt->dropped);
  free(rt->checks);
  ttpu_status_free(rt->check_error);
  ttpu_status_free(rt->async_error);
  free_options(&rt->opts);
  pthread_cond_destroy(&rt->event_cv);
  pthread_mutex_destroy(&rt->event_mu);
  pthread_mutex_destroy(&rt->mu);
  free(rt);
}

int ttpu_runtime_device_count(const ttpu_runtime* rt) {
  return rt->device_count;
}
int ttpu_runtime_keeps_host_heap(const ttpu_runtime* rt) {
  return rt && ttpu_pjrt_client_caps(rt->client)->host_code &&
         ttpu_heap_keep_freed();
}

void ttpu_runtime_release_host_heap(const ttpu_runtime* rt) {
  if (rt && ttpu_pjrt_client_caps(rt->client)->host_code) ttpu_heap_release();
}

const char* ttpu_runtime_platform_name(const ttpu_runtime* rt) {
  return ttpu_pjrt_client_platform_name(rt->client);
}
const char* ttpu_runtime_platform_version(const ttpu_runtime* rt) {
  return ttpu_pjrt_client_platform_version(rt->client);
}
const char* ttpu_runtime_plugin_path(const ttpu_runtime* rt) {
  return ttpu_pjrt_plugin_path(rt->plugin);
}

const char* ttpu_runtime_compile_options_id(const ttpu_runtime* rt) {
  return ttpu_pjrt_client_options_id(rt->client);
}

int ttpu_runtime_compile_threads(const ttpu_runtime* rt) {
  return rt->opts.compile_threads > 1 ? rt->opts.compile_threads : 1;
}

void ttpu_runtime_plugin_api_version(const ttpu_runtime* rt, int* major,
                                     int* minor) {
  ttpu_pjrt_plugin_version(rt->plugin, major, minor);
}

void ttpu_rt_add_pending(ttpu_runtime* rt, int device, ttpu_cache_entry* e,
                         ttpu_pjrt_event* ev) {
  int64_t ticket = ++rt->exec_ticket;
  if (e) e->last_run = ticket;
  /* Drop finished events from the front so the list stays short. */
  int keep = 0;
  for (int i = 0; i < rt->n_pending; ++i) {
    ttpu_pjrt_event* p = rt->pending[i];
    if (i < rt->n_pending - 8 && ttpu_pjrt_event_is_ready(rt->client, p)) {
      keep_async_error(rt, ttpu_pjrt_event_finish(rt->client, p,
                                                  "waiting for an event"));
      continue;
    }
    rt->pending[keep] = p;
    rt->pending_device[keep] = rt->pending_device[i];
    rt->pending_ticket[keep] = rt->pending_ticket[i];
    ++keep;
  }
  rt->n_pending = keep;
  if (ev && rt->n_pending == rt->cap_pending) {
    int cap = rt->cap_pending ? rt->cap_pending * 2 : 64;
    ttpu_pjrt_event** p = realloc(rt->pending, cap * sizeof(*p));
    if (p) rt->pending = p;
    int* d = p ? realloc(rt->pending_device, cap * sizeof(*d)) : NULL;
    if (d) rt->pending_device = d;
    int64_t* t = d ? realloc(rt->pending_ticket, cap * sizeof(*t)) : NULL;
    if (t) rt->pending_ticket = t;
    if (!t) {
      /* Out of host memory: wait for this one now rather than lose it. */
      keep_async_error(rt, ttpu_pjrt_event_finish(rt->client, ev,
                                                  "waiting for an event"));
      ev = NULL;
    } else {
      rt->cap_pending = cap;
    }
  }
  if (ev) {
    rt->pending[rt->n_pending] = ev;
    rt->pending_device[rt->n_pending] = device;
    rt->pending_ticket[rt->n_pending] = ticket;
    rt->n_pending++;
  }
  reap_retired(rt);
}

/* Awaits the pending events of device (-1: all), keeping the others in
 * order; returns the first error (under rt->mu). */
static ttpu_status* await_pending_locked(ttpu_runtime* rt, int device) {
  ttpu_status* err = NULL;
  int keep = 0;
  for (int i = 0; i < rt->n_pending; ++i) {
    if (device >= 0 && rt->pending_device[i] != device) {
      rt->pending[keep] = rt->pending[i];
      rt->pending_device[keep] = rt->pending_device[i];
      rt->pending_ticket[keep++] = rt->pending_ticket[i];
      continue;
    }
    ttpu_status* s = ttpu_pjrt_event_finish(rt->client, rt->pending[i],
                                            "waiting for an event");
    if (s && !err) err = s;
    else ttpu_status_free(s);
  }
  rt->n_pending = keep;
  reap_retired(rt);
  return err;
}

static void wait_event_callbacks(ttpu_runtime* rt, int device);

static void await_all_locked(ttpu_runtime* rt) {
  keep_async_error(rt, await_pending_locked(rt, -1));
}

ttpu_status* ttpu_runtime_synchronize(ttpu_runtime* rt, int device) {
  ttpu_status* err = ttpu_rt_enter(rt);
  if (err) return err;
  err = ttpu_exec_flush(rt, TTPU_END_SYNC);
  err = ttpu_rt_take_checks(rt, err);
  /* An earlier asynchronous failure is reported once, here, before (and
   * instead of) anything newer. */
  if (rt->async_error) {
    ttpu_status_free(err);
    err = rt->async_error;
    rt->async_error = NULL;
  }
  ttpu_status* s = await_pending_locked(rt, device);
  if (s && !err) err = s;
  else ttpu_status_free(s);
  /* The plugin runs an event's callbacks just after the program it waits
   * for is done, so they may still be running: once synchronize returns,
   * every event recorded before it has completed. */
  wait_event_callbacks(rt, device);
  pthread_mutex_unlock(&rt->mu);
  return err;
}

void ttpu_rt_account(ttpu_runtime* rt, int device, int64_t delta_bytes,
                     int64_t delta_buffers) {
  if (device < 0 || device >= TTPU_MAX_DEVICES) return;
  ttpu_device_state* ds = &rt->dev[device];
  ttpu_stats* st = &ds->stats;
  st->bytes_in_use += delta_bytes;
  st->live_buffers += delta_buffers;
  if (st->bytes_in_use > st->peak_bytes_in_use)
    st->peak_bytes_in_use = st->bytes_in_use;
  if (st->live_buffers > ds->peak_live_buffers)
    ds->peak_live_buffers = st->live_buffers;
  if (delta_buffers > 0) {
    ds->allocations += delta_buffers;
    ds->allocated_bytes += delta_bytes;
  } else if (delta_buffers < 0) {
    ds->frees -= delta_buffers;
    ds->freed_bytes -= delta_bytes;
  }
}

void ttpu_runtime_stats(ttpu_runtime* rt, int device, ttpu_stats* out) {
  memset(out, 0, sizeof(*out));
  if (ttpu_rt_forked(rt)) return; /* nothing of the parent's to count */
  pthread_mutex_lock(&rt->mu);
  /* Memory figures count what is alive: temporaries a fused window still
   * holds die when it runs. Its error waits for the next synchronize. */
  keep_async_error(rt, ttpu_exec_flush(rt, TTPU_END_SYNC));
  for (int d = 0; d < rt->device_count; ++d) {
    if (device >= 0 && d != device) continue;
    const ttpu_stats* s = &rt->dev[d].stats;
    out->compiles += s->compiles;
    out->compile_seconds += s->compile_seconds;
    out->cache_hits += s->cache_hits;
    out->executions += s->executions;
    out->h2d_bytes += s->h2d_bytes;
    out->d2h_bytes += s->d2h_bytes;
    out->bytes_in_use += s->bytes_in_use;
    out->peak_bytes_in_use += s->peak_bytes_in_use;
    out->live_buffers += s->live_buffers;
    out->disk_hits += s->disk_hits;
    out->disk_load_seconds += s->disk_load_seconds;
    out->disk_writes += s->disk_writes;
    out->windows += s->windows;
    out->window_ops += s->window_ops;
    if (s->window_max_ops > out->window_max_ops)
      out->window_max_ops = s->window_max_ops;
    for (int k = 0; k < TTPU_END_COUNT; ++k)
      out->window_ends[k] += s->window_ends[k];
    out->recompiles += s->recompiles;
    out->graph_replays += s->graph_replays;
    out->programs_shared += s->programs_shared;
  }
  /* The program cache is the runtime's, shared by its devices. */
  out->programs_loaded = (int64_t)ttpu_cache_size(rt->prog.cache);
  out->programs_evicted = ttpu_cache_evictions(rt->prog.cache);
  out->programs_reloaded = rt->prog.programs_reloaded;
  out->programs_retired = rt->n_retired;
  pthread_mutex_unlock(&rt->mu);
}

void ttpu_runtime_reset_peak(ttpu_runtime* rt, int device) {
  if (ttpu_rt_forked(rt)) return;
  pthread_mutex_lock(&rt->mu);
  for (int d = 0; d < rt->device_count; ++d)
    if (device < 0 || d == device) {
      rt->dev[d].stats.peak_bytes_in_use = rt->dev[d].stats.bytes_in_use;
      rt->dev[d].peak_live_buffers = rt->dev[d].stats.live_buffers;
    }
  pthread_mutex_unlock(&rt->mu);
}

int ttpu_runtime_last_compile_reason(ttpu_runtime* rt, char* buf, size_t n) {
  if (buf && n) buf[0] = 0;
  if (ttpu_rt_forked(rt)) return 0;
  pthread_mutex_lock(&rt->mu);
  int len = (int)strlen(rt->prog.last_reason);
  if (buf && n) snprintf(buf, n, "%s", rt->prog.last_reason);
  pthread_mutex_unlock(&rt->mu);
  return len;
}

/* ------------------------------------------------------------ rng state */

static ttpu_status* check_device(ttpu_runtime* rt, int device) {
  if (device < 0 || device >= rt->device_count)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "invalid device index %d (have %d tpu devices)",
                            device, rt->device_count);
  return NULL;
}

ttpu_status* ttpu_runtime_set_rng_state(ttpu_runtime* rt, int device,
                                        const uint64_t state[2]) {
  ttpu_status* s = check_device(rt, device);
  if (s) return s;
  ttpu_buffer* b = rt->dev[device].rng_state;
  if (!b) {
    s = ttpu_buffer_create(rt, device, 16, &b);
    if (s) return s;
    rt->dev[device].rng_state = b;
  }
  int64_t dims[1] = {2};
  return ttpu_buffer_upload(b, state, TTPU_U64, dims, 1);
}

ttpu_status* ttpu_runtime_manual_seed(ttpu_runtime* rt, int device,
                                      uint64_t seed) {
  /* THREE_FRY's state is (key, counter): the seed is the key. */
  uint64_t st[2] = {seed, 0};
  return ttpu_runtime_set_rng_state(rt, device, st);
}

ttpu_status* ttpu_runtime_get_rng_state(ttpu_runtime* rt, int device,
                                        uint64_t state[2]) {
  ttpu_status* s = check_device(rt, device);
  if (s) return s;
  return ttpu_buffer_download(rt->dev[device].rng_state, state, 16);
}

/* ------------------------------------------------------------ buffers */

ttpu_status* ttpu_buffer_create(ttpu_runtime* rt, int device, size_t nbytes,
                                ttpu_buffer** out) {
  *out = NULL;
  ttpu_status* s = check_device(rt, device);
  if (s) return s;
  ttpu_buffer* b = calloc(1, sizeof(*b));
  if (!b) return ttpu_status_oom();
  atomic_init(&b->refs, 1);
  b->rt = rt;
  b->device = device;
  b->nbytes = nbytes;
  b->phys_dtype = TTPU_U8;
  b->phys_ndim = 1;
  b->phys_dims[0] = (int64_t)nbytes;
  s = ttpu_rt_enter(rt);
  if (s) {
    free(b);
    return s;
  }
  ttpu_rt_account(rt, device, (int64_t)nbytes, 1);
  pthread_mutex_unlock(&rt->mu);
  *out = b;
  return NULL;
}

void ttpu_buffer_retain(ttpu_buffer* b) {
  if (b) atomic_fetch_add(&b->refs, 1);
}

static void buffer_free_locked(ttpu_buffer* b) {
  ttpu_runtime* rt = b->rt;
  if (b->sweep_noted) ttpu_bucket_forget(&rt->prog, b);
  ttpu_rt_drop_pjrt(rt, b->pb);
  ttpu_status_free(b->error);
  ttpu_rt_account(rt, b->device, -(int64_t)b->nbytes, -1);
  free(b);
}

void ttpu_buffer_release(ttpu_buffer* b) {
  if (!b || atomic_fetch_sub(&b->refs, 1) != 1) return;
  ttpu_runtime* rt = b->rt;
  /* In a forked child the parent's buffers are left alone (the child's
   * copy of them dies with it). */
  if (ttpu_rt_forked(rt)) return;
  pthread_mutex_lock(&rt->mu);
  buffer_free_locked(b);
  pthread_mutex_unlock(&rt->mu);
}

void ttpu_buffer_release_owner(ttpu_buffer* b) {
  if (!b) return;
  ttpu_runtime* rt = b->rt;
  if (b->sweep_noted && !ttpu_rt_forked(rt)) {
    pthread_mutex_lock(&rt->mu);
    ttpu_bucket_forget(&rt->prog, b);
    b->sweep_noted = 0;
    pthread_mutex_unlock(&rt->mu);
  }
  ttpu_buffer_release(b);
}

void ttpu_rt_release_locked(ttpu_buffer* b) {
  if (b && atomic_fetch_sub(&b->refs, 1) == 1) buffer_free_locked(b);
}

size_t ttpu_buffer_nbytes(const ttpu_buffer* b) { return b->nbytes; }
int ttpu_buffer_device(const ttpu_buffer* b) { return b->device; }

ttpu_status* ttpu_rt_zero_version(ttpu_runtime* rt, ttpu_buffer* b,
                                  ttpu_dtype dt) {
  int64_t n = (int64_t)(b->nbytes / ttpu_dtype_size(dt));
  void* zeros = calloc(b->nbytes ? b->nbytes : 1, 1);
  if (!zeros) return ttpu_status_oom();
  ttpu_pjrt_buffer* pb = NULL;
  ttpu_status* s = ttpu_pjrt_buffer_from_host(rt->client, b->device, zeros, dt,
                                              &n, 1, &pb);
  free(zeros);
  if (s) return s;
  rt->dev[b->device].stats.h2d_bytes += (int64_t)b->nbytes;
  ttpu_prog_set_version(&rt->prog, b, pb, dt, 1, &n);
  return NULL;
}

/* The error a storage keeps from the dropped op that was to write it
 * (exec/strict.c), as a new status; NULL when it has none. */
static ttpu_status* storage_error(const ttpu_buffer* b) {
  if (!b->error) return NULL;
  return ttpu_status_make(ttpu_status_code(b->error), "%s",
                          ttpu_status_message(b->error));
}

static ttpu_status* check_cover(const ttpu_buffer* b, ttpu_dtype dtype,
                                const int64_t* dims, int ndim) {
  if (ndim < 0 || ndim > TTPU_MAX_DIMS)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "rank %d not supported", ndim);
  if ((int)dtype < 0 || dtype >= TTPU_DTYPE_COUNT)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "invalid dtype %d", (int)dtype);
  size_t n = ttpu_dtype_size(dtype);
  for (int i = 0; i < ndim; ++i) n *= (size_t)dims[i];
  if (n != b->nbytes)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "upload of %zu bytes into a storage of %zu bytes",
                            n, b->nbytes);
  return NULL;
}

/* An upload; force_d >= 0 stores it padded in that dim whatever the
 * upload history says. */
static ttpu_status* upload(ttpu_buffer* b, const void* data, ttpu_dtype dtype,
                           const int64_t* dims, int ndim, int force_d) {
  ttpu_status* s = check_cover(b, dtype, dims, ndim);
  if (s) return s;
  /* A complex storage is kept as its interleaved real components (see
   * prog/assemble.c): the same bytes, the last dim doubled. */
  int64_t cdims[TTPU_MAX_DIMS];
  if (ttpu_dtype_is_complex(dtype)) {
    int n = 0;
    if (ndim == 0) {
      cdims[n++] = 2;
    } else {
      for (; n < ndim; ++n) cdims[n] = dims[n];
      cdims[n - 1] *= 2;
    }
    dtype = ttpu_dtype_real(dtype);
    dims = cdims;
    ndim = n;
  }
  ttpu_runtime* rt = b->rt;
  ttpu_pjrt_buffer* pb = NULL;
  s = ttpu_rt_check_fork(rt);
  if (s) return s;
  /* A tensor whose uploads keep changing in one dim (token ids of varying
   * length) is stored padded to its bucket (prog/bucket.c); the host pads
   * it for free. */
  ttpu_pad pad = {0, 0};
  int64_t cap[TTPU_MAX_DIMS];
  void* padded = NULL;
  if (ndim <= TTPU_MAX_DIMS) {
    pthread_mutex_lock(&rt->mu);
    int d = force_d >= 0 ? force_d
                         : ttpu_bucket_upload_dim(&rt->prog, dtype, ndim, dims,
                                                  rt->mode != TTPU_MODE_FUSED);
    if (force_d >= 0) ttpu_bucket_note_length(&rt->prog, dims[d]);
    int64_t bucket = d >= 0 ? ttpu_bucket_size(&rt->prog, dims[d]) : 0;
    pthread_mutex_unlock(&rt->mu);
    if (d >= 0) {
      size_t bytes = ttpu_dtype_size(dtype);
      for (int k = 0; k < ndim; ++k) {
        cap[k] = k == d ? bucket : dims[k];
        bytes *= (size_t)cap[k];
      }
      padded = calloc(1, bytes ? bytes : 1);
      if (!padded) return ttpu_status_oom();
      pad.mask = 1 << d;
      pad.n = dims[d];
      ttpu_pad_expand(data, padded, ttpu_dtype_size(dtype), ndim, cap, &pad);
    }
  }
  s = ttpu_pjrt_buffer_from_host(rt->client, b->device, padded ? padded : data,
                                 dtype, padded ? cap : dims, ndim, &pb);
  free(padded);
  if (s) return s;
  pthread_mutex_lock(&rt->mu);
  /* Recorded ops that touch b come before this upload. */
  s = ttpu_exec_touch(rt, b, 1);
  ttpu_exec_note_host_work(rt);
  ttpu_prog_set_version(&rt->prog, b, pb, dtype, ndim, pad.mask ? cap : dims);
  b->pad = pad;
  rt->dev[b->device].stats.h2d_bytes += (int64_t)b->nbytes;
  pthread_mutex_unlock(&rt->mu);
  return s;
}

ttpu_status* ttpu_buffer_upload(ttpu_buffer* b, const void* data,
                                ttpu_dtype dtype, const int64_t* dims,
                                int ndim) {
  return upload(b, data, dtype, dims, ndim, -1);
}

ttpu_status* ttpu_buffer_pad_dim(ttpu_buffer* b, ttpu_dtype dtype,
                                 const int64_t* dims, int ndim, int d,
                                 int* padded) {
  *padded = 0;
  ttpu_status* s = check_cover(b, dtype, dims, ndim);
  if (s) return s;
  if (d < 0 || d >= ndim)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "dim %d out of range for rank %d", d, ndim);
  if (ttpu_dtype_is_complex(dtype) || dims[d] <= 1 || !b->nbytes) return NULL;
  ttpu_runtime* rt = b->rt;
  s = ttpu_rt_enter(rt);
  if (s) return s;
  int64_t bucket = ttpu_bucket_size(&rt->prog, dims[d]);
  int already = b->pad.mask;
  *padded = already == 1 << d;
  pthread_mutex_unlock(&rt->mu);
  /* Buckets off, a storage padded already, or a bucket more than four
   * times the size (8 rows in a smallest bucket of 128): left as it is. */
  if (already || rt->prog.bucket_min <= 0 || bucket > 4 * dims[d]) return NULL;
  /* Padding on the device would take a program per size; the host pads
   * for free as it copies the storage back. */
  void* host = malloc(b->nbytes);
  if (!host) return ttpu_status_oom();
  s = ttpu_buffer_download(b, host, b->nbytes);
  if (!s) s = upload(b, host, dtype, dims, ndim, d);
  free(host);
  if (!s) *padded = 1;
  return s;
}

ttpu_status* ttpu_buffer_download(ttpu_buffer* b, void* dst, size_t nbytes) {
  if (nbytes != b->nbytes)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "download of %zu bytes from a storage of %zu bytes",
                            nbytes, b->nbytes);
  ttpu_runtime* rt = b->rt;
  if (nbytes == 0) return NULL;
  ttpu_status* s = ttpu_rt_enter(rt);
  if (s) return s;
  s = ttpu_rt_take_checks(rt, ttpu_exec_host_read(rt, b));
  if (!s) s = storage_error(b);
  ttpu_exec_note_host_work(rt);
  ttpu_pjrt_buffer* pb = b->pb;
  ttpu_pjrt_event* done = NULL;
  /* A padded version (prog/bucket.c) comes whole, then its true elements
   * are gathered on the host. */
  ttpu_pad pad = b->pad;
  int nd = b->phys_ndim;
  int64_t cap[TTPU_MAX_DIMS];
  memcpy(cap, b->phys_dims, sizeof(cap));
  size_t es = ttpu_dtype_size(b->phys_dtype), cap_bytes = es;
  for (int d = 0; d < nd; ++d) cap_bytes *= (size_t)cap[d];
  void* tmp = NULL;
  if (s) {
  } else if (!pb) {
    memset(dst, 0, nbytes);
    pad.mask = 0;
  } else {
    if (pad.mask) {
      tmp = malloc(cap_bytes ? cap_bytes : 1);
      if (!tmp) s = ttpu_status_oom();
    }
    /* The copy of the current version is enqueued under the lock, so it
     * is ordered before any later write; the wait is outside it, so other
     * threads' calls go on meanwhile (a version replaced during the wait
     * is destroyed, and PJRT keeps its memory until the copy is over). */
    if (!s)
      s = ttpu_pjrt_buffer_to_host_start(rt->client, pb, tmp ? tmp : dst,
                                         tmp ? cap_bytes : nbytes, &done);
    if (!s) rt->dev[b->device].stats.d2h_bytes += (int64_t)(tmp ? cap_bytes : nbytes);
  }
  pthread_mutex_unlock(&rt->mu);
  if (!s) s = ttpu_pjrt_event_finish(rt->client, done, "device->host copy");
  if (!s && tmp) ttpu_pad_compact(tmp, dst, es, nd, cap, &pad);
  free(tmp);
  return s;
}

ttpu_status* ttpu_buffer_copy(ttpu_buffer* dst, ttpu_buffer* src) {
  if (dst->nbytes != src->nbytes)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "copy of a %zu-byte storage into a %zu-byte one",
                            src->nbytes, dst->nbytes);
  if (dst == src) return NULL;
  ttpu_runtime* rt = dst->rt;
  ttpu_status* s = ttpu_rt_enter(rt);
  if (s) return s;
  s = ttpu_exec_touch(rt, src, 0);
  if (!s) s = ttpu_exec_touch(rt, dst, 1);
  if (!s) s = storage_error(src);
  ttpu_exec_note_host_work(rt);
  ttpu_pjrt_buffer* pb = NULL;
  if (!s && src->pb)
    s = ttpu_pjrt_buffer_copy_to_device(rt->client, src->pb, dst->device, &pb);
  if (!s) {
    if (pb) {
      ttpu_prog_set_version(&rt->prog, dst, pb, src->phys_dtype, src->phys_ndim,
                          src->phys_dims);
      dst->pad = src->pad;
    } else {
      ttpu_prog_set_version(&rt->prog, dst, NULL, TTPU_U8, 1, (int64_t[]){(int64_t)dst->nbytes});
    }
  }
  pthread_mutex_unlock(&rt->mu);
  return s;
}

ttpu_status* ttpu_buffer_wait(ttpu_buffer* b) {
  ttpu_runtime* rt = b->rt;
  ttpu_status* s = ttpu_rt_enter(rt);
  if (s) return s;
  s = ttpu_rt_take_checks(rt, ttpu_exec_touch(rt, b, 0));
  if (!s) s = storage_error(b);
  if (!s && b->pb) s = ttpu_pjrt_buffer_await(rt->client, b->pb);
  pthread_mutex_unlock(&rt->mu);
  return s;
}

/* ------------------------------------------------------------ host access */

struct ttpu_host_access {
  ttpu_buffer* b; /* retained */
  struct ttpu_host_pin* pin;
};

/* Awaits every execution enqueued up to `ticket`, keeping later ones
 * pending (under rt->mu). Their failures are asynchronous errors, which
 * synchronize reports. */
static void await_through_locked(ttpu_runtime* rt, int64_t ticket) {
  int done = 0;
  while (done < rt->n_pending && rt->pending_ticket[done] <= ticket) {
    keep_async_error(rt, ttpu_pjrt_event_finish(rt->client, rt->pending[done],
                                                "waiting for an event"));
    done++;
  }
  if (!done) return;
  rt->n_pending -= done;
  memmove(rt->pending, rt->pending + done, rt->n_pending * sizeof(*rt->pending));
  memmove(rt->pending_device, rt->pending_device + done,
          rt->n_pending * sizeof(*rt->pending_device));
  memmove(rt->pending_ticket, rt->pending_ticket + done,
          rt->n_pending * sizeof(*rt->pending_ticket));
  reap_retired(rt);
}

/* Whether the version's memory is laid out in storage order: a flat or
 * scalar version (a program's results of higher rank may take another
 * layout on some plugins, so those are copied instead). */
static int flat_version(const ttpu_buffer* b) {
  return b->phys_ndim <= 1 && !b->pad.mask;
}

ttpu_status* ttpu_buffer_host_begin(ttpu_buffer* b, int write, void** data,
                                    ttpu_host_access** out) {
  *data = NULL;
  *out = NULL;
  ttpu_runtime* rt = b->rt;
  if (!ttpu_pjrt_client_caps(rt->client)->host_pointers)
    return ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "the %s plugin's device memory is not host memory",
                            ttpu_pjrt_client_platform_name(rt->client));
  ttpu_host_access* a = calloc(1, sizeof(*a));
  if (!a) return ttpu_status_oom();
  ttpu_status* s = ttpu_rt_enter(rt);
  if (s) {
    free(a);
    return s;
  }
  s = ttpu_rt_take_checks(rt, ttpu_exec_touch(rt, b, write));
  if (!s) s = storage_error(b);
  ttpu_exec_note_host_work(rt);
  /* Unwritten: zeros, as a flat version the host can address. */
  if (!s && !b->pb) s = ttpu_rt_zero_version(rt, b, TTPU_U8);
  if (!s && !flat_version(b))
    s = ttpu_status_make(TTPU_UNIMPLEMENTED,
                         "the storage's version has rank %d, not a flat "
                         "layout the host can address", b->phys_ndim);
  /* Written by a program: nothing reads or writes its bytes once that
   * program and every one enqueued before it have finished. */
  if (!s && write) await_through_locked(rt, rt->exec_ticket);
  if (!s) s = ttpu_pjrt_buffer_await(rt->client, b->pb);
  void* p = NULL;
  if (!s && b->nbytes) s = ttpu_pjrt_buffer_host_pointer(rt->client, b->pb, &p);
  if (!s && !b->pin) {
    struct ttpu_host_pin* pin = calloc(1, sizeof(*pin));
    if (!pin) s = ttpu_status_oom();
    if (!s) s = ttpu_pjrt_buffer_pin(rt->client, b->pb);
    if (s) {
      free(pin);
    } else {
      pin->pb = b->pb;
      b->pin = pin;
    }
  }
  if (!s) {
    b->pin->refs++;
    a->pin = b->pin;
    a->b = b;
    ttpu_buffer_retain(b);
  }
  pthread_mutex_unlock(&rt->mu);
  if (s) {
    free(a);
    return s;
  }
  *data = p;
  *out = a;
  return NULL;
}

void ttpu_buffer_host_end(ttpu_host_access* a) {
  if (!a) return;
  ttpu_buffer* b = a->b;
  ttpu_runtime* rt = b->rt;
  if (!ttpu_rt_forked(rt)) {
    pthread_mutex_lock(&rt->mu);
    struct ttpu_host_pin* pin = a->pin;
    if (--pin->refs == 0) {
      ttpu_pjrt_buffer_unpin(rt->client, pin->pb);
      if (b->pin == pin) b->pin = NULL; /* still the current version */
      else ttpu_rt_drop_pjrt(rt, pin->pb);
      free(pin);
    }
    pthread_mutex_unlock(&rt->mu);
  }
  ttpu_buffer_release(b);
  free(a);
}

/* ------------------------------------------------------------ events */

/* An event waits for the programs of its device that were still running
 * when it was recorded: the plugin calls it back as each one finishes
 * (PJRT_Event_OnReady), and for the event recorded before it on the same
 * device, which passes its completion on. Completion therefore needs
 * neither the runtime's lock nor a thread of ours, and the time of the
 * last callback is the time the covered work finished on the device. */
struct ttpu_event {
  atomic_int refs;  /* owners, one per pending callback, the predecessor */
  ttpu_runtime* rt; /* outlives the callbacks: synchronize drains them */
  int device;
  int fork_generation;
  int64_t ticket;   /* the last execution it covers (rt->exec_ticket) */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* Under mu: */
  int waiting;      /* callbacks and predecessor to come, and the record */
  int failed;       /* a program it waited for failed */
  int64_t done_ns;  /* record time, then the latest completion seen */
  ttpu_event* next; /* recorded after it while it was pending (a ref) */
};

static int64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
}

/* In a forked child the parent's events are left alone: their callbacks
 * would come from plugin threads the child does not have. */
static int event_forked(const ttpu_event* ev) {
  return atomic_load_explicit(&fork_generation, memory_order_relaxed) !=
         ev->fork_generation;
}

void ttpu_event_retain(ttpu_event* ev) {
  if (ev) atomic_fetch_add(&ev->refs, 1);
}

void ttpu_event_release(ttpu_event* ev) {
  if (!ev || event_forked(ev) || atomic_fetch_sub(&ev->refs, 1) != 1) return;
  /* The last reference: nothing is pending (callbacks and a predecessor
   * hold references), so next was handed on at completion. */
  pthread_cond_destroy(&ev->cv);
  pthread_mutex_destroy(&ev->mu);
  free(ev);
}

int ttpu_event_device(const ttpu_event* ev) { return ev->device; }

/* One thing ev waits for is over, at time t; when it was the last, ev is
 * complete and passes that on to the event recorded after it. */
static void event_signal(ttpu_event* ev, int64_t t, int failed) {
  ttpu_event* held = NULL; /* the reference to ev after the first */
  while (ev) {
    ttpu_event* next = NULL;
    pthread_mutex_lock(&ev->mu);
    if (t > ev->done_ns) ev->done_ns = t;
    if (failed) ev->failed = 1;
    if (--ev->waiting == 0) {
      next = ev->next; /* its reference passes to this loop */
      ev->next = NULL;
      t = ev->done_ns;
      failed = ev->failed;
      pthread_cond_broadcast(&ev->cv);
    }
    pthread_mutex_unlock(&ev->mu);
    ttpu_event_release(held);
    held = next;
    ev = next;
  }
}

static void event_on_ready(void* arg, int failed) {
  ttpu_event* ev = arg;
  event_signal(ev, monotonic_ns(), failed);
  ttpu_runtime* rt = ev->rt;
  int device = ev->device;
  ttpu_event_release(ev); /* the callback's reference */
  /* Last: once the count drops, synchronize may return and the runtime
   * may be destroyed. */
  pthread_mutex_lock(&rt->event_mu);
  if (--rt->dev[device].event_callbacks == 0)
    pthread_cond_broadcast(&rt->event_cv);
  pthread_mutex_unlock(&rt->event_mu);
}

/* Waits until the callbacks of device's events (-1: every device's) have
 * run; the programs they wait for have finished (under rt->mu, after
 * awaiting them). */
static void wait_event_callbacks(ttpu_runtime* rt, int device) {
  pthread_mutex_lock(&rt->event_mu);
  for (int d = 0; d < rt->device_count; ++d) {
    if (device >= 0 && d != device) continue;
    while (rt->dev[d].event_callbacks > 0)
      pthread_cond_wait(&rt->event_cv, &rt->event_mu);
  }
  pthread_mutex_unlock(&rt->event_mu);
}

ttpu_status* ttpu_event_record(ttpu_runtime* rt, int device, ttpu_event** out) {
  *out = NULL;
  ttpu_status* s = check_device(rt, device);
  if (s) return s;
  ttpu_event* ev = calloc(1, sizeof(*ev));
  if (!ev) return ttpu_status_oom();
  atomic_init(&ev->refs, 1);
  ev->rt = rt;
  ev->device = device;
  ev->fork_generation = rt->fork_generation;
  ev->waiting = 1; /* the record itself, until the end of this call */
  pthread_mutex_init(&ev->mu, NULL);
  pthread_cond_init(&ev->cv, NULL);
  s = ttpu_rt_enter(rt);
  if (!s) {
    s = ttpu_exec_flush(rt, TTPU_END_SYNC);
    if (s) pthread_mutex_unlock(&rt->mu);
  }
  if (s) {
    /* Never recorded, never seen by anyone. */
    pthread_cond_destroy(&ev->cv);
    pthread_mutex_destroy(&ev->mu);
    free(ev);
    return s;
  }
  ev->ticket = rt->exec_ticket;
  ev->done_ns = monotonic_ns();
  ttpu_device_state* ds = &rt->dev[device];
  /* The programs up to the previous event's are covered by it: while it
   * is pending this one waits for it, and once it has completed they
   * have finished. */
  int64_t covered = 0;
  ttpu_event* prev = ds->last_event;
  if (prev) {
    covered = prev->ticket;
    pthread_mutex_lock(&prev->mu);
    if (prev->waiting > 0) {
      ttpu_event_retain(ev);
      prev->next = ev;
      ev->waiting++; /* no callback can reach ev yet: mu unneeded */
    }
    pthread_mutex_unlock(&prev->mu);
  }
  for (int i = rt->n_pending - 1; i >= 0 && rt->pending_ticket[i] > covered;
       --i) {
    if (rt->pending_device[i] != device ||
        ttpu_pjrt_event_is_ready(rt->client, rt->pending[i]))
      continue;
    ttpu_event_retain(ev);
    pthread_mutex_lock(&ev->mu);
    ev->waiting++;
    pthread_mutex_unlock(&ev->mu);
    pthread_mutex_lock(&rt->event_mu);
    ds->event_callbacks++;
    pthread_mutex_unlock(&rt->event_mu);
    ttpu_status* r = ttpu_pjrt_event_on_ready(rt->client, rt->pending[i],
                                              event_on_ready, ev);
    if (r) {
      pthread_mutex_lock(&rt->event_mu);
      ds->event_callbacks--;
      pthread_mutex_unlock(&rt->event_mu);
      /* The plugin takes no callback: wait for that program now (it
       * stays pending for synchronize, which reports its error). */
      ttpu_status_free(r);
      r = ttpu_pjrt_event_await(rt->client, rt->pending[i]);
      event_signal(ev, monotonic_ns(), r != NULL);
      ttpu_status_free(r);
      ttpu_event_release(ev);
    }
  }
  ttpu_event_retain(ev);
  ttpu_event_release(ds->last_event);
  ds->last_event = ev;
  pthread_mutex_unlock(&rt->mu);
  event_signal(ev, 0, 0); /* the record is over */
  *out = ev;
  return NULL;
}

ttpu_status* ttpu_event_query(ttpu_event* ev, int* done) {
  *done = 0;
  if (event_forked(ev))
    return ttpu_status_make(TTPU_FAILED_PRECONDITION,
                            "an event of the parent process cannot be used "
                            "in a forked child");
  pthread_mutex_lock(&ev->mu);
  *done = ev->waiting == 0;
  pthread_mutex_unlock(&ev->mu);
  return NULL;
}

ttpu_status* ttpu_event_wait(ttpu_event* ev) {
  if (event_forked(ev))
    return ttpu_status_make(TTPU_FAILED_PRECONDITION,
                            "an event of the parent process cannot be used "
                            "in a forked child");
  pthread_mutex_lock(&ev->mu);
  while (ev->waiting > 0) pthread_cond_wait(&ev->cv, &ev->mu);
  int failed = ev->failed;
  pthread_mutex_unlock(&ev->mu);
  if (!failed) return NULL;
  return ttpu_status_make(TTPU_PLUGIN_ERROR,
                          "a program enqueued on device %d before the event "
                          "failed (synchronize reports its error)",
                          ev->device);
}

static int event_done_at(ttpu_event* ev, int64_t* t) {
  pthread_mutex_lock(&ev->mu);
  int done = ev->waiting == 0;
  *t = ev->done_ns;
  pthread_mutex_unlock(&ev->mu);
  return done;
}

ttpu_status* ttpu_event_elapsed_ms(ttpu_event* start, ttpu_event* end,
                                   double* ms) {
  *ms = 0;
  if (event_forked(start) || event_forked(end))
    return ttpu_status_make(TTPU_FAILED_PRECONDITION,
                            "an event of the parent process cannot be used "
                            "in a forked child");
  int64_t t0 = 0, t1 = 0;
  if (!event_done_at(start, &t0) || !event_done_at(end, &t1))
    return ttpu_status_make(TTPU_FAILED_PRECONDITION,
                            "both events must have completed");
  *ms = (double)(t1 - t0) / 1e6;
  return NULL;
}

ttpu_status* ttpu_runtime_query(ttpu_runtime* rt, int device, int* idle) {
  *idle = 0;
  ttpu_status* s = check_device(rt, device);
  if (!s) s = ttpu_rt_enter(rt);
  if (s) return s;
  s = ttpu_exec_flush(rt, TTPU_END_SYNC);
  int busy = 0;
  for (int i = rt->n_pending - 1; !s && !busy && i >= 0; --i)
    busy = rt->pending_device[i] == device &&
           !ttpu_pjrt_event_is_ready(rt->client, rt->pending[i]);
  pthread_mutex_unlock(&rt->mu);
  *idle = !s && !busy;
  return s;
}

/* ------------------------------------------------------------ devices */

ttpu_status* ttpu_runtime_device_info(ttpu_runtime* rt, int device,
                                      ttpu_device_info* out) {
  memset(out, 0, sizeof(*out));
  out->bytes_limit = -1;
  out->bytes_in_use = -1;
  ttpu_status* s = check_device(rt, device);
  if (!s) s = ttpu_rt_check_fork(rt);
  if (s) return s;
  out->id = ttpu_pjrt_client_device_id(rt->client, device);
  s = ttpu_pjrt_client_device_kind(rt->client, device, out->kind,
                                   sizeof(out->kind));
  if (s && ttpu_status_code(s) == TTPU_UNIMPLEMENTED) {
    /* A plugin without device descriptions: its platform names it. */
    ttpu_status_free(s);
    s = NULL;
    snprintf(out->kind, sizeof(out->kind), "%s",
             ttpu_runtime_platform_name(rt));
  }
  if (s) return s;
  ttpu_pjrt_device_memory m;
  s = ttpu_pjrt_client_device_memory(rt->client, device, &m);
  if (s && ttpu_status_code(s) == TTPU_UNIMPLEMENTED) {
    ttpu_status_free(s);
    return NULL;
  }
  if (s) return s;
  out->bytes_limit = m.bytes_limit;
  out->bytes_in_use = m.bytes_in_use;
  return NULL;
}

/* The host's available and total memory (/proc/meminfo, else sysconf). */
static void host_memory(int64_t* avail, int64_t* total) {
  *avail = -1;
  *total = -1;
  FILE* f = fopen("/proc/meminfo", "r");
  if (f) {
    char line[256];
    long long kb;
    int64_t free_kb = -1;
    while (fgets(line, sizeof(line), f)) {
      if (sscanf(line, "MemTotal: %lld kB", &kb) == 1) *total = kb * 1024;
      else if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
        *avail = kb * 1024;
      else if (sscanf(line, "MemFree: %lld kB", &kb) == 1) free_kb = kb;
    }
    fclose(f);
    if (*avail < 0 && free_kb >= 0) *avail = free_kb * 1024;
  }
  long page = sysconf(_SC_PAGESIZE);
  if (*total < 0) *total = (int64_t)sysconf(_SC_PHYS_PAGES) * page;
  if (*avail < 0) *avail = (int64_t)sysconf(_SC_AVPHYS_PAGES) * page;
}

ttpu_status* ttpu_runtime_memory_info(ttpu_runtime* rt, int device,
                                      int64_t* free_bytes,
                                      int64_t* total_bytes) {
  *free_bytes = 0;
  *total_bytes = 0;
  ttpu_device_info info;
  ttpu_status* s = ttpu_runtime_device_info(rt, device, &info);
  if (s) return s;
  if (info.bytes_limit > 0) {
    int64_t used = info.bytes_in_use > 0 ? info.bytes_in_use : 0;
    *total_bytes = info.bytes_limit;
    *free_bytes = used < info.bytes_limit ? info.bytes_limit - used : 0;
    return NULL;
  }
  const char* platform = ttpu_runtime_platform_name(rt);
  if (ttpu_pjrt_client_caps(rt->client)->host_code) {
    host_memory(free_bytes, total_bytes);
    return NULL;
  }
  return ttpu_status_make(TTPU_UNIMPLEMENTED,
                          "the '%s' plugin reports no memory figures for its "
                          "devices",
                          platform);
}

/* ------------------------------------------------------------ memory */

void ttpu_runtime_memory_stats(ttpu_runtime* rt, int device,
                               ttpu_memory_stats* out) {
  memset(out, 0, sizeof(*out));
  if (ttpu_rt_forked(rt)) return;
  pthread_mutex_lock(&rt->mu);
  /* As in ttpu_runtime_stats: a fused window's temporaries die when it
   * runs, so it runs first; its error waits for the next synchronize. */
  keep_async_error(rt, ttpu_exec_flush(rt, TTPU_END_SYNC));
  for (int d = 0; d < rt->device_count; ++d) {
    if (device >= 0 && d != device) continue;
    const ttpu_device_state* ds = &rt->dev[d];
    out->bytes_in_use += ds->stats.bytes_in_use;
    out->peak_bytes_in_use += ds->stats.peak_bytes_in_use;
    out->buffers_in_use += ds->stats.live_buffers;
    out->peak_buffers_in_use += ds->peak_live_buffers;
    out->allocations += ds->allocations;
    out->frees += ds->frees;
    out->allocated_bytes += ds->allocated_bytes;
    out->freed_bytes += ds->freed_bytes;
  }
  pthread_mutex_unlock(&rt->mu);
}

void ttpu_runtime_reset_accumulated(ttpu_runtime* rt, int device) {
  if (ttpu_rt_forked(rt)) return;
  pthread_mutex_lock(&rt->mu);
  for (int d = 0; d < rt->device_count; ++d) {
    if (device >= 0 && d != device) continue;
    rt->dev[d].allocations = rt->dev[d].frees = 0;
    rt->dev[d].allocated_bytes = rt->dev[d].freed_bytes = 0;
  }
  pthread_mutex_unlock(&rt->mu);
}

/* ------------------------------------------------------------ warnings */


void ttpu_rt_warn(ttpu_runtime* rt, const char* fmt, ...) {
  size_t used = strlen(rt->warning);
  if (used && used + 2 < sizeof(rt->warning)) {
    rt->warning[used++] = '\n';
    rt->warning[used] = 0;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rt->warning + used, sizeof(rt->warning) - used, fmt, ap);
  va_end(ap);
}

int ttpu_runtime_take_warning(ttpu_runtime* rt, char* buf, size_t n) {
  /* racy peek; the copy below is locked */
  if (!rt->warning[0] || ttpu_rt_forked(rt)) return 0;
  pthread_mutex_lock(&rt->mu);
  int have = rt->warning[0] != 0;
  if (have && buf && n) snprintf(buf, n, "%s", rt->warning);
  rt->warning[0] = 0;
  pthread_mutex_unlock(&rt->mu);
  return have;
}

/* The program sink a cache filler sets (ttpu_aot.h): the runtime's
 * program layer hands it every disk-cacheable program it lowers. */
ttpu_status* ttpu_aot_set_program_sink(ttpu_runtime* rt,
                                       ttpu_aot_program_sink fn, void* user) {
  if (!rt) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "runtime is NULL");
  ttpu_status* s = ttpu_rt_enter(rt);
  if (s) return s;
  rt->prog.sink = fn;
  rt->prog.sink_user = fn ? user : NULL;
  ttpu_rt_unlock(rt);
  return NULL;
}

ttpu_status* ttpu_aot_unload_programs(ttpu_runtime* rt) {
  if (!rt) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "runtime is NULL");
  ttpu_status* s = ttpu_rt_enter(rt);
  if (s) return s;
  s = ttpu_exec_flush(rt, TTPU_END_SYNC);
  if (!s) ttpu_cache_evict_unpinned(rt->prog.cache);
  ttpu_rt_unlock(rt);
  return s;
}

/* ------------------------------------------------------------ compile log */

typedef struct {
  ttpu_pjrt_client* client;
  ttpu_program_info* out;
  int max, n;
} programs_ctx;

static int program_info(void* user, const ttpu_cache_entry* e) {
  programs_ctx* c = user;
  if (c->n < c->max) {
    ttpu_program_info* p = &c->out[c->n];
    memset(p, 0, sizeof(*p));
    snprintf(p->what, sizeof(p->what), "%s", e->what);
    p->hits = e->hits;
    ttpu_pjrt_memory_stats m;
    ttpu_status* s = ttpu_pjrt_exec_memory_stats(c->client, e->exec, &m);
    p->code_bytes = s ? -1 : m.generated_code_bytes;
    p->temp_bytes = s ? -1 : m.temp_bytes;
    p->argument_bytes = s ? -1 : m.argument_bytes;
    p->output_bytes = s ? -1 : m.output_bytes;
    ttpu_status_free(s);
  }
  c->n++;
  return 0;
}

int ttpu_runtime_programs(ttpu_runtime* rt, ttpu_program_info* out, int max) {
  if (ttpu_rt_forked(rt)) return 0;
  pthread_mutex_lock(&rt->mu);
  programs_ctx c = {rt->client, out, out ? max : 0, 0};
  ttpu_cache_each(rt->prog.cache, program_info, &c);
  pthread_mutex_unlock(&rt->mu);
  return c.n;
}

int ttpu_runtime_compile_log_count(ttpu_runtime* rt) {
  if (ttpu_rt_forked(rt)) return 0;
  pthread_mutex_lock(&rt->mu);
  int n = ttpu_prog_log_count(&rt->prog);
  pthread_mutex_unlock(&rt->mu);
  return n;
}

int ttpu_runtime_compile_log_get(ttpu_runtime* rt, int index,
                                 ttpu_compile_record* out) {
  if (ttpu_rt_forked(rt)) return 0;
  pthread_mutex_lock(&rt->mu);
  int ok = ttpu_prog_log_get(&rt->prog, index, out);
  pthread_mutex_unlock(&rt->mu);
  return ok;
}

void ttpu_runtime_compile_log_clear(ttpu_runtime* rt) {
  if (ttpu_rt_forked(rt)) return;
  pthread_mutex_lock(&rt->mu);
  ttpu_prog_log_clear(&rt->prog);
  pthread_mutex_unlock(&rt->mu);
}
