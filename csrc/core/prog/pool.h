/* pool.h - a pool of compile threads (internal).
 *
 * A pool runs jobs on N threads of its own: a job compiles one StableHLO
 * text with PJRT (ttpu_pool_submit_compile) or runs any function
 * (ttpu_pool_submit_fn). Jobs start in the order they were submitted; each
 * keeps its own status, its executable and how long it ran. The pool needs
 * no runtime: strict mode (exec/strict.c) and the AOT batch compile
 * (aot/aot.c) each make their own.
 *
 * Threads start at the first submit (a pool that is never used costs no
 * thread). A pool of 0 threads runs every job on the submitting thread,
 * inside submit. In a forked child a pool made by the parent has no
 * threads: submit runs the job inline there and destroy frees nothing the
 * parent's threads might use.
 *
 * Ownership: the caller owns each job it submitted and frees it with
 * ttpu_pool_job_free (which waits for it, or cancels it if it has not
 * started). ttpu_pool_destroy cancels the jobs not started (status
 * FAILED_PRECONDITION, "cancelled"), waits for the running ones and joins
 * the threads; jobs may be freed after it, never while it runs.
 *
 * Threads: submit, done, wait, free and destroy may be called from any
 * thread; a job's results (status, exec, seconds) are read only once
 * ttpu_pool_job_done said 1 or ttpu_pool_job_wait returned. The compile
 * client must outlive the jobs that use it (PJRT's compile is
 * thread-safe). */
#ifndef TTPU_PROG_POOL_H_
#define TTPU_PROG_POOL_H_

#include <stddef.h>

#include "ttpu.h"
#include "../pjrt/ttpu_pjrt.h"

typedef struct ttpu_pool ttpu_pool;
typedef struct ttpu_pool_job ttpu_pool_job;

/* The threads a pool uses by default: the CPUs this process may run on
 * (sched_getaffinity), else the online ones; at least 1. */
int ttpu_pool_default_threads(void);

/* A pool of `threads` threads (<= 0: jobs run inline). Caller destroys. */
ttpu_status* ttpu_pool_create(int threads, ttpu_pool** out);
void ttpu_pool_destroy(ttpu_pool* p);
/* Threads started so far (0 before the first submit). */
int ttpu_pool_started_threads(const ttpu_pool* p);

/* Compiles text[0..len) with the serialized CompileOptionsProto
 * (options may be NULL: the client's default; copied) on client. The job
 * takes ownership of text (malloc'ed), freed with the job. */
ttpu_status* ttpu_pool_submit_compile(ttpu_pool* p, ttpu_pjrt_client* client,
                                      char* text, size_t len,
                                      const void* options, size_t options_len,
                                      ttpu_pool_job** out);
/* Runs fn(arg) on a pool thread; its status becomes the job's. */
ttpu_status* ttpu_pool_submit_fn(ttpu_pool* p, ttpu_status* (*fn)(void* arg),
                                 void* arg, ttpu_pool_job** out);

/* 1 once the job finished (or was cancelled), else 0; never blocks. */
int ttpu_pool_job_done(ttpu_pool_job* j);
/* Blocks until the job finished. */
void ttpu_pool_job_wait(ttpu_pool_job* j);
/* The job's status after it finished: NULL on success (borrowed). */
const ttpu_status* ttpu_pool_job_status(const ttpu_pool_job* j);
/* Takes the status out of the job (the caller frees it). */
ttpu_status* ttpu_pool_job_take_status(ttpu_pool_job* j);
/* Takes a compile job's executable (the caller destroys it); NULL when it
 * failed or was taken. */
ttpu_pjrt_exec* ttpu_pool_job_take_exec(ttpu_pool_job* j);
/* The wall-clock seconds the job ran on its thread. */
double ttpu_pool_job_seconds(const ttpu_pool_job* j);
/* A compile job's text (borrowed, valid until the job is freed). */
const char* ttpu_pool_job_text(const ttpu_pool_job* j, size_t* len);
/* Waits for the job (cancels it when not started), destroys an executable
 * not taken, frees it. NULL is a no-op. */
void ttpu_pool_job_free(ttpu_pool_job* j);

#endif /* TTPU_PROG_POOL_H_ */
