/* ttpu_coll.h - collectives among several devices of one runtime.
 *
 * One call moves data between storages on distinct devices of the same
 * PJRT client (one storage per participating device, a "member"). It runs
 * as ONE replicated XLA program: a StableHLO all_reduce, all_gather,
 * reduce_scatter, all_to_all or collective_permute with one replica per
 * member, compiled once per signature (cached with the runtime's other
 * programs) and launched with one execute over all members' devices.
 *
 * Ordering follows the engine's rules for op calls: the program reads each
 * input storage's current version (it waits, on the device, for the work
 * that produces it), and each output storage gets its new version at once,
 * pending until the program finishes; later ops and host reads are ordered
 * after it. Fused-mode windows touching the storages are run first.
 *
 * Storages are whole flat arrays: a member's input is read as `count`
 * elements of `dtype` in storage order and its output written as the
 * kind's output count (below); the storage sizes must match exactly.
 * Inputs and outputs may be the same storage (in place).
 */
#ifndef TTPU_COLL_H_
#define TTPU_COLL_H_

#include "ttpu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  /* every output = the reduction of every input (count elements) */
  TTPU_COLL_ALL_REDUCE = 0,
  /* every output = the input of member `root` (count elements) */
  TTPU_COLL_BROADCAST,
  /* every output (n * count) = the inputs concatenated in member order */
  TTPU_COLL_ALL_GATHER,
  /* input count = n * chunk: output of member i (chunk elements) = the
   * reduction of chunk i of every input */
  TTPU_COLL_REDUCE_SCATTER,
  /* input count = n * chunk: chunk j of member i's input becomes chunk i
   * of member j's output (count elements) */
  TTPU_COLL_ALL_TO_ALL,
  /* send/recv pairs: member i's input goes to member peer[i]'s output;
   * an output nobody sends to becomes zeros (count elements) */
  TTPU_COLL_PERMUTE,
  TTPU_COLL_KIND_COUNT
} ttpu_coll_kind;

typedef enum {
  TTPU_REDUCE_SUM = 0,
  TTPU_REDUCE_AVG,        /* sum / n; integers divide truncating */
  TTPU_REDUCE_PRODUCT,
  TTPU_REDUCE_MIN,
  TTPU_REDUCE_MAX,
  TTPU_REDUCE_PREMUL_SUM, /* sum of input * premul (the factor converted
                             to the dtype first, as PyTorch does) */
  TTPU_REDUCE_OP_COUNT
} ttpu_reduce_op;

typedef struct {
  ttpu_buffer* input;   /* borrowed */
  ttpu_buffer* output;  /* borrowed; may be input */
} ttpu_coll_member;

typedef struct {
  ttpu_coll_kind kind;
  ttpu_dtype dtype;
  int n_members;                  /* 1..64, each on a distinct device */
  const ttpu_coll_member* members;
  int64_t count;                  /* elements of each input */
  ttpu_reduce_op op;              /* ALL_REDUCE, REDUCE_SCATTER */
  double premul;                  /* PREMUL_SUM's factor */
  int root;                       /* BROADCAST: index into members */
  const int* peer;                /* PERMUTE: per member, the member it
                                     sends to, or -1; targets distinct */
} ttpu_coll_call;

/* Elements of each member's output for call c (-1 when c is invalid). */
int64_t ttpu_coll_output_count(const ttpu_coll_call* c);

/* Runs the collective: checks it (INVALID_ARGUMENT for sizes, devices or
 * arguments that do not fit, UNIMPLEMENTED for a dtype/op pair XLA has no
 * collective for), finds or compiles its program, enqueues it. Storages
 * are borrowed. */
ttpu_status* ttpu_coll_run(ttpu_runtime* rt, const ttpu_coll_call* c);
/* Thread-safe: it takes the runtime's lock for the whole launch; the call
 * struct is borrowed and must not change meanwhile. */

/* Names for messages (static strings): "all_reduce", "sum", ... */
/* Thread-safe: static names. */
const char* ttpu_coll_kind_name(ttpu_coll_kind k);
const char* ttpu_reduce_op_name(ttpu_reduce_op op);

#ifdef __cplusplus
}
#endif

#endif /* TTPU_COLL_H_ */
