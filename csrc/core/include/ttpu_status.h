/* ttpu_status.h - status values: how every engine call reports failure.
 * Part of the public C API: ttpu.h includes every part, and its opening
 * comment states the conventions. */
#ifndef TTPU_STATUS_H_
#define TTPU_STATUS_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ status */

typedef enum {
  TTPU_OK = 0,
  TTPU_INVALID_ARGUMENT = 1,  /* bad input: maps to ValueError/RuntimeError */
  TTPU_NOT_FOUND = 2,         /* missing plugin, missing file */
  TTPU_UNIMPLEMENTED = 3,     /* op or dtype the engine cannot lower */
  TTPU_RESOURCE_EXHAUSTED = 4,/* out of device memory */
  TTPU_FAILED_PRECONDITION = 5, /* plugin too old, engine not initialised */
  TTPU_INTERNAL = 6,          /* a bug in the engine */
  TTPU_PLUGIN_ERROR = 7,      /* an error reported by the PJRT plugin */
  TTPU_INDEX_ERROR = 8,       /* out-of-range index: maps to IndexError */
  TTPU_LINALG_ERROR = 9,      /* a matrix the algorithm cannot take (singular,
                                 not positive-definite): maps to
                                 torch.linalg.LinAlgError */
} ttpu_code;

/* Not thread-safe: a status belongs to the thread that got it until it is
 * freed (hand it over, do not share it). The functions below are
 * thread-safe on distinct statuses. */
typedef struct ttpu_status ttpu_status;

/* Makes a status with a printf-style message. Caller frees. */
ttpu_status* ttpu_status_make(ttpu_code code, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prepends "context: " to the message of s (s may be NULL: returns NULL). */
ttpu_status* ttpu_status_annotate(ttpu_status* s, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The status for a failed host allocation: TTPU_RESOURCE_EXHAUSTED,
 * "out of host memory". Caller frees. */
ttpu_status* ttpu_status_oom(void);
ttpu_code ttpu_status_code(const ttpu_status* s);
/* Borrowed; valid until the status is freed. */
const char* ttpu_status_message(const ttpu_status* s);
void ttpu_status_free(ttpu_status* s);

#ifdef __cplusplus
}
#endif

#endif /* TTPU_STATUS_H_ */
