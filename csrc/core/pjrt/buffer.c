/* buffer.c - device buffers and events.
 *
 * ttpu_pjrt_buffer* / ttpu_pjrt_event* are the plugin's own pointers, cast
 * (see pjrt_internal.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pjrt_internal.h"

#define RAW_BUF(b) ((ttpu_pjrt_abi_buffer*)(b))
#define RAW_EVT(e) ((ttpu_pjrt_abi_event*)(e))

/* Product of dims times elem, or an error on a negative dim or overflow. */
static ttpu_status* dense_nbytes(const int64_t* dims, int ndim, size_t elem,
                                 size_t* out) {
  size_t n = elem;
  for (int i = 0; i < ndim; i++) {
    if (dims[i] < 0)
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "dimension %d is negative (%lld)", i,
                              (long long)dims[i]);
    if (dims[i] != 0 && n > SIZE_MAX / (uint64_t)dims[i])
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "shape is too large to address");
    n *= (size_t)dims[i];
  }
  *out = n;
  return NULL;
}

static ttpu_status* event_await_raw(const ttpu_pjrt_abi_api* api,
                                    ttpu_pjrt_abi_event* e, const char* what) {
  ttpu_pjrt_abi_event_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_event_args, event);
  a.event = e;
  ttpu_status* s = TTPU_PJRT_CALL_RAW(api, event_await, a);
  /* An injected failure of a wait still waits: what the event stands for
   * must finish before anything it uses is freed. */
  if (!s && ttpu_pjrt_fault_due("event_await"))
    s = ttpu_pjrt_fault_status("event_await");
  return s ? ttpu_status_annotate(s, "%s", what) : NULL;
}

static void event_destroy_raw(const ttpu_pjrt_abi_api* api,
                              ttpu_pjrt_abi_event* e) {
  if (!e) return;
  ttpu_pjrt_abi_event_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_event_args, event);
  a.event = e;
  ttpu_status_free(TTPU_PJRT_CALL(api, event_destroy, a));
}

ttpu_status* ttpu_pjrt_buffer_from_host(ttpu_pjrt_client* c, int device,
                                        const void* data, ttpu_dtype dtype,
                                        const int64_t* dims, int ndim,
                                        ttpu_pjrt_buffer** out) {
  if (!out) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  ttpu_pjrt_abi_device* dev;
  ttpu_status* s = ttpu_pjrt_client_device(c, device, &dev);
  if (s) return s;
  ttpu_pjrt_abi_type type = ttpu_pjrt_type_from_dtype(dtype);
  if (type == TTPU_PJRT_T_INVALID)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "invalid dtype %d",
                            (int)dtype);
  if (ndim < 0 || ndim > TTPU_MAX_DIMS || (ndim > 0 && !dims))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "invalid rank %d (max %d) or NULL dims", ndim,
                            TTPU_MAX_DIMS);
  size_t nbytes;
  if ((s = dense_nbytes(dims, ndim, ttpu_dtype_size(dtype), &nbytes)))
    return s;
  /* An empty tensor reads no bytes, but the plugin still wants a pointer. */
  static const uint64_t empty_source = 0;
  if (!data) {
    if (nbytes)
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "host data is NULL for %zu bytes", nbytes);
    data = &empty_source;
  }

  ttpu_pjrt_abi_buffer_from_host_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_buffer_from_host_args, buffer);
  a.client = c->client;
  a.data = data;
  a.type = type;
  a.dims = ndim ? dims : NULL;
  a.num_dims = (size_t)ndim;
  /* The caller frees `data` as soon as we return (ttpu_pjrt.h). */
  a.host_buffer_semantics = TTPU_PJRT_HOST_IMMUTABLE_ONLY_DURING_CALL;
  a.device = dev;
  s = TTPU_PJRT_CALL(c->api, client_buffer_from_host_buffer, a);
  if (s) return s;
  /* With only-during-call semantics this event has already fired; waiting
   * costs nothing and keeps us correct on a plugin that treats the flag
   * more loosely. The event is ours to destroy either way. */
  if (a.done_with_host_buffer) {
    s = ttpu_pjrt_event_finish(c, (ttpu_pjrt_event*)a.done_with_host_buffer,
                               "waiting for the host->device copy");
    if (s) {
      ttpu_pjrt_buffer_destroy(c, (ttpu_pjrt_buffer*)a.buffer);
      return s;
    }
  }
  *out = (ttpu_pjrt_buffer*)a.buffer;
  return NULL;
}

ttpu_status* ttpu_pjrt_buffer_host_pointer(ttpu_pjrt_client* c,
                                           ttpu_pjrt_buffer* b, void** out) {
  *out = NULL;
  if (!c || !b)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "NULL client or buffer");
  if (!c->caps.host_pointers)
    return ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "the %s plugin's device memory is not host "
                            "memory the host can address",
                            c->platform_name ? c->platform_name : "");
  ttpu_pjrt_abi_unsafe_pointer_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_unsafe_pointer_args, buffer_pointer);
  a.buffer = RAW_BUF(b);
  ttpu_status* s = TTPU_PJRT_CALL(c->api, buffer_unsafe_pointer, a);
  if (s) return s;
  if (!a.buffer_pointer)
    return ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "the plugin gave no address for a buffer");
  *out = (void*)a.buffer_pointer;
  return NULL;
}

ttpu_status* ttpu_pjrt_buffer_pin(ttpu_pjrt_client* c, ttpu_pjrt_buffer* b) {
  if (c->n_pinned == c->cap_pinned) {
    int cap = c->cap_pinned ? 2 * c->cap_pinned : 8;
    ttpu_pjrt_buffer** p = realloc(c->pinned, (size_t)cap * sizeof(*p));
    if (!p) return ttpu_status_oom();
    c->pinned = p;
    c->cap_pinned = cap;
  }
  c->pinned[c->n_pinned++] = b;
  return NULL;
}

void ttpu_pjrt_buffer_unpin(ttpu_pjrt_client* c, ttpu_pjrt_buffer* b) {
  for (int i = c->n_pinned - 1; i >= 0; --i) {
    if (c->pinned[i] != b) continue;
    c->pinned[i] = c->pinned[--c->n_pinned];
    return;
  }
}

int ttpu_pjrt_buffer_pinned(const ttpu_pjrt_client* c,
                            const ttpu_pjrt_buffer* b) {
  for (int i = 0; i < c->n_pinned; ++i)
    if (c->pinned[i] == b) return 1;
  return 0;
}

ttpu_status* ttpu_pjrt_buffer_shape(ttpu_pjrt_client* c, ttpu_pjrt_buffer* b,
                                    ttpu_dtype* dtype, int64_t* dims,
                                    int* ndim) {
  if (!c || !b)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "NULL client or buffer");
  ttpu_pjrt_abi_element_type_args t;
  TTPU_PJRT_INIT_ARGS(t, ttpu_pjrt_abi_element_type_args, type);
  t.buffer = RAW_BUF(b);
  ttpu_status* s = TTPU_PJRT_CALL(c->api, buffer_element_type, t);
  if (s) return s;
  ttpu_dtype dt = ttpu_pjrt_dtype_from_type(t.type);
  if (dt == TTPU_DTYPE_NONE)
    return ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "buffer has PJRT element type %d, which torchtpu "
                            "does not support",
                            (int)t.type);
  ttpu_pjrt_abi_dimensions_args d;
  TTPU_PJRT_INIT_ARGS(d, ttpu_pjrt_abi_dimensions_args, num_dims);
  d.buffer = RAW_BUF(b);
  if ((s = TTPU_PJRT_CALL(c->api, buffer_dimensions, d))) return s;
  if (d.num_dims > TTPU_MAX_DIMS)
    return ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "buffer has rank %zu, more than %d", d.num_dims,
                            TTPU_MAX_DIMS);
  if (dtype) *dtype = dt;
  if (ndim) *ndim = (int)d.num_dims;
  if (dims && d.num_dims) memcpy(dims, d.dims, d.num_dims * sizeof(*dims));
  return NULL;
}

ttpu_status* ttpu_pjrt_buffer_to_host_start(ttpu_pjrt_client* c,
                                            ttpu_pjrt_buffer* b, void* dst,
                                            size_t nbytes,
                                            ttpu_pjrt_event** done) {
  *done = NULL;
  ttpu_dtype dt;
  int64_t dims[TTPU_MAX_DIMS];
  int ndim;
  ttpu_status* s = ttpu_pjrt_buffer_shape(c, b, &dt, dims, &ndim);
  if (s) return s;
  size_t want;
  if ((s = dense_nbytes(dims, ndim, ttpu_dtype_size(dt), &want))) return s;
  /* A short dst would be written past its end by the plugin. */
  if (nbytes != want)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "buffer_to_host: buffer holds %zu bytes, "
                            "destination has %zu",
                            want, nbytes);
  if (want == 0) return ttpu_pjrt_buffer_await(c, b);
  if (!dst)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "destination is NULL");

  ttpu_pjrt_abi_to_host_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_to_host_args, event);
  a.src = RAW_BUF(b);
  a.dst = dst;
  a.dst_size = nbytes;
  if ((s = TTPU_PJRT_CALL(c->api, buffer_to_host_buffer, a))) return s;
  *done = (ttpu_pjrt_event*)a.event;
  return NULL;
}

ttpu_status* ttpu_pjrt_event_finish(ttpu_pjrt_client* c, ttpu_pjrt_event* e,
                                    const char* what) {
  if (!e) return NULL;
  ttpu_status* s = event_await_raw(c->api, RAW_EVT(e), what);
  event_destroy_raw(c->api, RAW_EVT(e));
  return s;
}

ttpu_status* ttpu_pjrt_buffer_to_host(ttpu_pjrt_client* c, ttpu_pjrt_buffer* b,
                                      void* dst, size_t nbytes) {
  ttpu_pjrt_event* done = NULL;
  ttpu_status* s = ttpu_pjrt_buffer_to_host_start(c, b, dst, nbytes, &done);
  if (s) return s;
  return ttpu_pjrt_event_finish(c, done, "device->host copy");
}

ttpu_status* ttpu_pjrt_buffer_copy_to_device(ttpu_pjrt_client* c,
                                             ttpu_pjrt_buffer* b, int device,
                                             ttpu_pjrt_buffer** out) {
  if (!out) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!b) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "buffer is NULL");
  ttpu_pjrt_abi_device* dev;
  ttpu_status* s = ttpu_pjrt_client_device(c, device, &dev);
  if (s) return s;
  ttpu_pjrt_abi_copy_to_device_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_copy_to_device_args, dst_buffer);
  a.buffer = RAW_BUF(b);
  a.dst_device = dev;
  if ((s = TTPU_PJRT_CALL(c->api, buffer_copy_to_device, a))) return s;
  *out = (ttpu_pjrt_buffer*)a.dst_buffer;
  return NULL;
}

void ttpu_pjrt_buffer_destroy(ttpu_pjrt_client* c, ttpu_pjrt_buffer* b) {
  if (!c || !b) return;
  ttpu_pjrt_abi_buffer_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_buffer_args, buffer);
  a.buffer = RAW_BUF(b);
  ttpu_status_free(TTPU_PJRT_CALL(c->api, buffer_destroy, a));
}

ttpu_status* ttpu_pjrt_buffer_await(ttpu_pjrt_client* c, ttpu_pjrt_buffer* b) {
  if (!c || !b)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "NULL client or buffer");
  ttpu_pjrt_abi_ready_event_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_ready_event_args, event);
  a.buffer = RAW_BUF(b);
  ttpu_status* s = TTPU_PJRT_CALL(c->api, buffer_ready_event, a);
  if (s) return s;
  return ttpu_pjrt_event_finish(c, (ttpu_pjrt_event*)a.event,
                                "waiting for a buffer");
}

int ttpu_pjrt_event_is_ready(ttpu_pjrt_client* c, ttpu_pjrt_event* e) {
  if (!c || !e) return 1;
  ttpu_pjrt_abi_event_is_ready_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_event_is_ready_args, is_ready);
  a.event = RAW_EVT(e);
  ttpu_status* s = TTPU_PJRT_CALL(c->api, event_is_ready, a);
  if (s) {
    /* Report "ready" so a poller moves on to await, which returns the
     * error, instead of spinning forever. */
    ttpu_status_free(s);
    return 1;
  }
  return a.is_ready ? 1 : 0;
}

ttpu_status* ttpu_pjrt_event_await(ttpu_pjrt_client* c, ttpu_pjrt_event* e) {
  if (!c || !e)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "NULL client or event");
  return event_await_raw(c->api, RAW_EVT(e), "waiting for an event");
}

void ttpu_pjrt_event_destroy(ttpu_pjrt_client* c, ttpu_pjrt_event* e) {
  if (!c) return;
  event_destroy_raw(c->api, RAW_EVT(e));
}

typedef struct {
  const ttpu_pjrt_abi_api* api; /* static in the plugin, which stays mapped */
  void (*fn)(void* arg, int failed);
  void* arg;
} on_ready_ctx;

static void on_ready_trampoline(ttpu_pjrt_abi_error* error, void* user_arg) {
  on_ready_ctx* c = user_arg;
  if (error) ttpu_pjrt_error_discard(c->api, error);
  c->fn(c->arg, error != NULL);
  free(c);
}

ttpu_status* ttpu_pjrt_event_on_ready(ttpu_pjrt_client* c, ttpu_pjrt_event* e,
                                      void (*fn)(void* arg, int failed),
                                      void* arg) {
  if (!c || !e || !fn)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "NULL client, event or callback");
  on_ready_ctx* ctx = malloc(sizeof(*ctx));
  if (!ctx) return ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of memory");
  ctx->api = c->api;
  ctx->fn = fn;
  ctx->arg = arg;
  ttpu_pjrt_abi_event_on_ready_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_event_on_ready_args, user_arg);
  a.event = RAW_EVT(e);
  a.callback = on_ready_trampoline;
  a.user_arg = ctx;
  ttpu_status* s = TTPU_PJRT_CALL_RAW(c->api, event_on_ready, a);
  if (s) free(ctx); /* the plugin did not take the callback */
  return s;
}
