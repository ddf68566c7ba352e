/* status.c - ttpu_status: an error code plus an owned message.
 *
 * A status is one allocation (header + message bytes) so that freeing it can
 * never fail half-way. When that allocation itself fails we hand out a
 * static, immutable status instead of NULL: returning NULL would turn an
 * error into success. ttpu_status_free knows not to free it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttpu.h"

struct ttpu_status {
  ttpu_code code;
  char message[];
};

/* Immutable: shared by every caller that hits out-of-memory while reporting
 * an error. Its message is a separate static string because a flexible
 * array member cannot be initialised statically in strict C11. */
static const struct ttpu_status ttpu_status_oom_ = {TTPU_RESOURCE_EXHAUSTED};
static const char ttpu_status_oom_message_[] =
    "out of host memory while building an error message";

static ttpu_status* status_oom(void) {
  return (ttpu_status*)&ttpu_status_oom_;
}

static ttpu_status* status_vmake(ttpu_code code, const char* prefix,
                                 const char* fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) n = 0;
  size_t plen = prefix ? strlen(prefix) : 0;
  ttpu_status* s = malloc(sizeof(*s) + plen + (size_t)n + 1);
  if (!s) return status_oom();
  s->code = code;
  if (plen) memcpy(s->message, prefix, plen);
  vsnprintf(s->message + plen, (size_t)n + 1, fmt, ap);
  return s;
}

ttpu_status* ttpu_status_make(ttpu_code code, const char* fmt, ...) {
  /* TTPU_OK would read as an error that is not one; keep it an error. */
  if (code == TTPU_OK) code = TTPU_INTERNAL;
  va_list ap;
  va_start(ap, fmt);
  ttpu_status* s = status_vmake(code, NULL, fmt, ap);
  va_end(ap);
  return s;
}

ttpu_status* ttpu_status_oom(void) {
  return ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of host memory");
}

ttpu_status* ttpu_status_annotate(ttpu_status* s, const char* fmt, ...) {
  if (!s) return NULL;
  if (s == status_oom()) return s;
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) n = 0;
  size_t old = strlen(s->message);
  ttpu_status* r = malloc(sizeof(*r) + (size_t)n + 2 + old + 1);
  if (!r) {
    /* Keep the original error rather than losing it to a context line. */
    va_end(ap);
    return s;
  }
  r->code = s->code;
  vsnprintf(r->message, (size_t)n + 1, fmt, ap);
  va_end(ap);
  memcpy(r->message + n, ": ", 2);
  memcpy(r->message + n + 2, s->message, old + 1);
  free(s);
  return r;
}

ttpu_code ttpu_status_code(const ttpu_status* s) {
  return s ? s->code : TTPU_OK;
}

const char* ttpu_status_message(const ttpu_status* s) {
  if (!s) return "";
  if (s == &ttpu_status_oom_) return ttpu_status_oom_message_;
  return s->message;
}

void ttpu_status_free(ttpu_status* s) {
  if (s && s != status_oom()) free(s);
}
