/* error.c - plugin errors become ttpu statuses that keep the plugin's text. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "pjrt_internal.h"

/* ------------------------------------------------------------ faults */

/* A test facility, process-wide like the plugin it stands in for: the
 * calls of one slot, after `skip` good ones, fail `count` times. */
atomic_int ttpu_pjrt_faults_armed;
static pthread_mutex_t fault_mu = PTHREAD_MUTEX_INITIALIZER;
static char fault_slot[64];
static int fault_skip, fault_count;

void ttpu_debug_inject_plugin_fault(const char* slot, int skip, int count) {
  pthread_mutex_lock(&fault_mu);
  snprintf(fault_slot, sizeof(fault_slot), "%s", slot ? slot : "");
  fault_skip = skip > 0 ? skip : 0;
  fault_count = slot && *slot && count > 0 ? count : 0;
  atomic_store(&ttpu_pjrt_faults_armed, fault_count > 0);
  pthread_mutex_unlock(&fault_mu);
}

int ttpu_pjrt_fault_take(const char* slot) {
  pthread_mutex_lock(&fault_mu);
  int due = 0;
  if (fault_count > 0 && !strcmp(slot, fault_slot)) {
    if (fault_skip > 0) {
      fault_skip--;
    } else {
      due = 1;
      if (--fault_count == 0) atomic_store(&ttpu_pjrt_faults_armed, 0);
    }
  }
  pthread_mutex_unlock(&fault_mu);
  return due;
}

ttpu_status* ttpu_pjrt_fault_status(const char* slot) {
  return ttpu_status_make(TTPU_PLUGIN_ERROR,
                          "%s: the plugin call failed (injected fault)", slot);
}

ttpu_status* ttpu_pjrt_status_from_error(const ttpu_pjrt_abi_api* api,
                                         ttpu_pjrt_abi_error* err,
                                         const char* what) {
  if (!err) return NULL;
  ttpu_pjrt_abi_error_message_args m;
  TTPU_PJRT_INIT_ARGS(m, ttpu_pjrt_abi_error_message_args, message_size);
  m.error = err;
  api->error_message(&m);

  ttpu_code code = TTPU_PLUGIN_ERROR;
  ttpu_pjrt_abi_error_code_args g;
  TTPU_PJRT_INIT_ARGS(g, ttpu_pjrt_abi_error_code_args, code);
  g.error = err;
  ttpu_pjrt_abi_error* gerr = api->error_get_code(&g);
  if (gerr) {
    ttpu_pjrt_error_discard(api, gerr);
  } else if (g.code == TTPU_PJRT_CODE_RESOURCE_EXHAUSTED) {
    code = TTPU_RESOURCE_EXHAUSTED;
  }

  /* The message is borrowed from err and not NUL-terminated: copy it out
   * before destroying err. */
  int len = m.message ? (int)(m.message_size > 1 << 20 ? 1 << 20
                                                       : m.message_size)
                      : 0;
  ttpu_status* s = ttpu_status_make(code, "%s: %.*s", what, len,
                                    m.message ? m.message : "");
  ttpu_pjrt_error_discard(api, err);
  return s;
}

void ttpu_pjrt_error_discard(const ttpu_pjrt_abi_api* api,
                             ttpu_pjrt_abi_error* err) {
  if (!err) return;
  ttpu_pjrt_abi_error_destroy_args d;
  TTPU_PJRT_INIT_ARGS(d, ttpu_pjrt_abi_error_destroy_args, error);
  d.error = err;
  api->error_destroy(&d);
}

ttpu_status* ttpu_pjrt_missing_slot(const ttpu_pjrt_abi_api* api,
                                    const char* slot) {
  return ttpu_status_make(
      TTPU_UNIMPLEMENTED,
      "the PJRT plugin (ABI 0.%d) does not provide %s",
      api->pjrt_api_version.minor_version, slot);
}

ttpu_pjrt_abi_type ttpu_pjrt_type_from_dtype(ttpu_dtype t) {
  switch (t) {
    case TTPU_BOOL: return TTPU_PJRT_T_PRED;
    case TTPU_U8: return TTPU_PJRT_T_U8;
    case TTPU_I8: return TTPU_PJRT_T_S8;
    case TTPU_I16: return TTPU_PJRT_T_S16;
    case TTPU_I32: return TTPU_PJRT_T_S32;
    case TTPU_I64: return TTPU_PJRT_T_S64;
    case TTPU_F16: return TTPU_PJRT_T_F16;
    case TTPU_BF16: return TTPU_PJRT_T_BF16;
    case TTPU_F32: return TTPU_PJRT_T_F32;
    case TTPU_F64: return TTPU_PJRT_T_F64;
    case TTPU_U16: return TTPU_PJRT_T_U16;
    case TTPU_U32: return TTPU_PJRT_T_U32;
    case TTPU_U64: return TTPU_PJRT_T_U64;
    default: return TTPU_PJRT_T_INVALID;
  }
}

ttpu_dtype ttpu_pjrt_dtype_from_type(ttpu_pjrt_abi_type t) {
  switch (t) {
    case TTPU_PJRT_T_PRED: return TTPU_BOOL;
    case TTPU_PJRT_T_U8: return TTPU_U8;
    case TTPU_PJRT_T_S8: return TTPU_I8;
    case TTPU_PJRT_T_S16: return TTPU_I16;
    case TTPU_PJRT_T_S32: return TTPU_I32;
    case TTPU_PJRT_T_S64: return TTPU_I64;
    case TTPU_PJRT_T_F16: return TTPU_F16;
    case TTPU_PJRT_T_BF16: return TTPU_BF16;
    case TTPU_PJRT_T_F32: return TTPU_F32;
    case TTPU_PJRT_T_F64: return TTPU_F64;
    case TTPU_PJRT_T_U16: return TTPU_U16;
    case TTPU_PJRT_T_U32: return TTPU_U32;
    case TTPU_PJRT_T_U64: return TTPU_U64;
    default: return TTPU_DTYPE_NONE;
  }
}
