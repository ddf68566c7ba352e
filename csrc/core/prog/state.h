/* state.h - what the program layer keeps between calls (internal): the
 * memory and disk caches, the compile log, the last compile reason and
 * each op's last compiled signature.
 *
 * The runtime embeds one ttpu_programs (exec/ creates the caches and frees
 * everything at ttpu_runtime_destroy) and prog/ reaches it through
 * ttpu_rt_programs (exec/internal.h). Every field is under the runtime's
 * lock. */
#ifndef TTPU_PROG_STATE_H_
#define TTPU_PROG_STATE_H_

#include <stdint.h>

#include "ttpu.h"
#include "../cache/cache.h"
#include "../cache/disk.h"

#define TTPU_LOG_CAP 4096

typedef struct ttpu_programs {
  ttpu_cache* cache;        /* compiled programs by signature key */
  ttpu_disk* disk;          /* persistent cache, NULL when off */
  ttpu_compile_record* log; /* ring of the last TTPU_LOG_CAP compiles */
  int64_t n_log;
  char last_reason[512];    /* why the last program compiled */
  struct ttpu_last_sig* last_sigs; /* per op id: see prog/plan.c */
  int n_last_sigs;
  int64_t ops_run;          /* ops the strict path ran (recompile warning) */
  int64_t programs_reloaded; /* evicted programs needed again */
  /* Sees every disk-cacheable program lowered here (ttpu_aot_set_program_sink). */
  void (*sink)(void* user, const char* what, const int64_t* key,
               size_t n_key, const char* text, size_t text_len,
               const void* results, size_t results_len, int n_results,
               const void* options, size_t options_len);
  void* sink_user;
} ttpu_programs;

#endif /* TTPU_PROG_STATE_H_ */
