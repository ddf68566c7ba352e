/* results.c - an execution's results handed to their storages, the rng
 * state, or read as data-dependent checks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "program.h"
#include "../base/env.h"

/* A program's data-dependent error check (ttpu_l_check): the one place an
 * op waits for its own result (or, for a check the owner took to read
 * later, where the host next waits). The check indices option
 * (TORCHTPU_CHECK_INDICES=0) skips the read. */
int ttpu_prog_checks_on(const ttpu_prog_ctx* pc) {
  int check = pc->opts->check_indices;
  if (check < 0) check = ttpu_env_check_indices();
  return check != 0;
}

ttpu_status* ttpu_prog_read_check(ttpu_prog_ctx* pc, int dev,
                                const ttpu_result_plan* rp,
                                ttpu_pjrt_buffer* buf) {
  if (!ttpu_prog_checks_on(pc)) return NULL;
  int64_t info[4];
  ttpu_status* s = ttpu_pjrt_buffer_to_host(pc->client, buf, info, sizeof(info));
  if (s) return s;
  pc->stats[dev]->d2h_bytes += (int64_t)sizeof(info);
  if (!info[0]) return NULL;
  /* The flag's message among fmt's alternatives (separated by 0x1e, the
   * lowering header's TTPU_CHECK_ALT); the last when there are fewer. */
  const char* fmt = rp->check_fmt;
  for (int64_t k = 1; k < info[0]; ++k) {
    const char* next = strchr(fmt, 0x1e);
    if (!next) break;
    fmt = next + 1;
  }
  const char* end = strchr(fmt, 0x1e);
  size_t len = end ? (size_t)(end - fmt) : strlen(fmt);
  char one[TTPU_CHECK_FMT_MAX]; /* len < sizeof(rp->check_fmt) */
  memcpy(one, fmt, len);
  one[len] = 0;
  /* fmt was written by the lowering, which consumes at most three args */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  s = ttpu_status_make(rp->check_code, one, (long long)info[1], (long long)info[2],
                       (long long)info[3]);
#pragma GCC diagnostic pop
  return s;
}


/* A storage's padding records one true size for all its padded dims: the
 * version's logical elements (each padded dim of size n, within the
 * bucket) must be the storage's bytes exactly. */
static int pad_holds_storage(const ttpu_pad* pad, int nd, const int64_t* cap, size_t es, size_t nbytes) {
  int64_t logical[TTPU_MAX_DIMS];
  ttpu_pad_logical(pad, nd, cap, logical);
  size_t numel = 1;
  for (int d = 0; d < nd; ++d) {
    if (pad->n < 0 || (pad->mask >> d & 1 && pad->n > cap[d])) return 0;
    numel *= (size_t)logical[d];
  }
  return pad->mask >> nd == 0 && numel * es == nbytes;
}

ttpu_status* ttpu_prog_take_results(ttpu_prog_ctx* pc, int dev,
                                  const ttpu_cache_entry* e,
                                  ttpu_pjrt_buffer** outs,
                                  ttpu_buffer* (*buffer_of)(void*, int),
                                  void* ctx, const ttpu_pad* pads) {
  ttpu_status* s = NULL;
  for (int r = 0; r < e->n_results; ++r) {
    const ttpu_result_plan* rp = &e->results[r];
    if (rp->slot == TTPU_RESULT_CHECK) {
      if (!s && pc->defer_checks && pc->hooks.keep_check &&
          ttpu_prog_checks_on(pc) &&
          pc->hooks.keep_check(pc->hooks.host, dev, rp, outs[r]))
        continue;
      ttpu_status* c = s ? NULL : ttpu_prog_read_check(pc, dev, rp, outs[r]);
      if (c) s = c;
      ttpu_pjrt_buffer_destroy(pc->client, outs[r]);
      continue;
    }
    ttpu_buffer* b = rp->slot >= 0 ? buffer_of(ctx, rp->slot)
                                   : pc->hooks.rng_state(pc->hooks.host, dev);
    ttpu_prog_set_version(pc, b, outs[r], rp->dtype, rp->ndim, rp->dims);
    if (pads && rp->slot >= 0 && pads[rp->slot].mask) {
      if (pad_holds_storage(&pads[rp->slot], rp->ndim, rp->dims, ttpu_dtype_size(rp->dtype), b->nbytes)) {
        b->pad = pads[rp->slot];
      } else {
        /* a bucketing rule's mistake: refuse the version rather than let a
         * download or a later program read past the storage */
        b->error = ttpu_status_make(TTPU_INTERNAL,
                                    "a padded result (true size %lld) does not hold its storage's %zu bytes",
                                    (long long)pads[rp->slot].n, b->nbytes);
        if (!s) s = ttpu_status_make(TTPU_INTERNAL, "%s", ttpu_status_message(b->error));
      }
    }
  }
  return s;
}

void ttpu_prog_set_version(ttpu_prog_ctx* pc, ttpu_buffer* b,
                           ttpu_pjrt_buffer* pb, ttpu_dtype dtype, int ndim,
                           const int64_t* dims) {
  /* A version the host is working on is the pin's to destroy. */
  if (b->pin) {
    if (b->pin->pb != pb) b->pin = NULL;
  } else if (b->pb && b->pb != pb) {
    if (pc->hooks.drop_buffer) pc->hooks.drop_buffer(pc->hooks.host, b->pb);
    else ttpu_pjrt_buffer_destroy(pc->client, b->pb);
  }
  ttpu_status_free(b->error);
  b->error = NULL;
  b->pb = pb;
  b->phys_dtype = dtype;
  b->phys_ndim = ndim;
  for (int i = 0; i < ndim; ++i) b->phys_dims[i] = dims[i];
  b->pad.mask = 0;
  b->pad.n = 0;
}

/* Copies between the true elements of a padded version (`padded`) and
 * their row-major order (`exact`), in the direction `to_padded`. */
static void pad_copy(char* padded, char* exact, size_t es, int nd,
                     const int64_t* cap, const ttpu_pad* pad, int to_padded);

void ttpu_pad_compact(const void* src, void* dst, size_t es, int nd,
                      const int64_t* cap, const ttpu_pad* pad) {
  pad_copy((char*)src, dst, es, nd, cap, pad, 0);
}

void ttpu_pad_expand(const void* src, void* dst, size_t es, int nd,
                     const int64_t* cap, const ttpu_pad* pad) {
  pad_copy(dst, (char*)src, es, nd, cap, pad, 1);
}

static void pad_copy(char* padded, char* exact, size_t es, int nd,
                     const int64_t* cap, const ttpu_pad* pad, int to_padded) {
  int64_t logical[TTPU_MAX_DIMS];
  ttpu_pad_logical(pad, nd, cap, logical);
  /* The dims after the last padded one are one contiguous run in both. */
  int last = -1;
  for (int d = 0; d < nd; ++d)
    if (pad->mask >> d & 1) last = d;
  size_t run = es;
  for (int d = last + 1; d < nd; ++d) run *= (size_t)cap[d];
  if (last < 0) {
    if (to_padded) memcpy(padded, exact, run);
    else memcpy(exact, padded, run);
    return;
  }
  /* Odometer over dims 0..last of the logical box. */
  int64_t idx[TTPU_MAX_DIMS] = {0};
  char* o = exact;
  for (;;) {
    size_t at = 0;
    for (int d = 0; d <= last; ++d) at = at * (size_t)cap[d] + (size_t)idx[d];
    if (to_padded) memcpy(padded + at * run, o, run);
    else memcpy(o, padded + at * run, run);
    o += run;
    int d = last;
    while (d >= 0 && ++idx[d] == logical[d]) idx[d--] = 0;
    if (d < 0) break;
  }
}
