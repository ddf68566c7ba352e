/* compile.c - compiling, (de)serializing and describing executables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pjrt_internal.h"

/* CompileOptionsProto{
 *   executable_build_options (3) { num_replicas (4): 1, num_partitions (5): 1 }
 *   compile_portable_executable (4): true }
 * An empty proto aborts XLA inside the plugin, so something must be sent.
 * Portable: the executable has no device assignment and runs on whichever
 * device ttpu_pjrt_execute names (PJRT's execute_device), so one compile
 * serves every device. Without it the executable is bound to device 0 and
 * the CPU plugin refuses execute_device 1 ("ExecuteShard attempted to
 * execute on device id 1 which is not addressable"); caller-supplied
 * options must therefore carry the portable flag too. Serialized portable
 * executables stay portable after deserialization. */
static const unsigned char kDefaultCompileOptions[] = {0x1a, 0x04, 0x20, 0x01,
                                                       0x28, 0x01, 0x20, 0x01};

/* --------------------------------------------- replicated compile options
 * CompileOptionsProto {
 *   executable_build_options (3) {
 *     num_replicas (4): n, num_partitions (5): 1,
 *     device_assignment (9) { replica_count (1): n, computation_count (2): 1,
 *       computation_devices (3) { replica_device_ids (1): packed ids } } } }
 * Not portable: the replicas' devices are fixed at compile time, which is
 * what lets one execute call run every replica. */
size_t ttpu_pjrt_put_varint(unsigned char* p, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    p[n++] = (unsigned char)(v | 0x80);
    v >>= 7;
  }
  p[n++] = (unsigned char)v;
  return n;
}

/* Appends field `tag` (length-delimited) holding src[0..len) to dst. */
static size_t put_bytes(unsigned char* dst, int tag, const unsigned char* src,
                        size_t len) {
  size_t n = ttpu_pjrt_put_varint(dst, (uint64_t)tag << 3 | 2);
  n += ttpu_pjrt_put_varint(dst + n, len);
  memcpy(dst + n, src, len);
  return n + len;
}

size_t ttpu_pjrt_replicated_options(const int* device_ids, int n,
                                    unsigned char* buf, size_t cap) {
  if (n <= 0 || !device_ids) return 0;
  /* Each piece is bounded by ten bytes per varint. */
  size_t bound = (size_t)n * 10 + 64;
  unsigned char* ids = malloc(bound);
  unsigned char* comp = malloc(bound);
  unsigned char* assign = malloc(bound);
  unsigned char* build = malloc(bound);
  size_t out = 0;
  if (ids && comp && assign && build) {
    size_t ni = 0;
    for (int i = 0; i < n; i++)
      ni += ttpu_pjrt_put_varint(ids + ni, (uint64_t)device_ids[i]);
    size_t nc = put_bytes(comp, 1, ids, ni);
    size_t na = ttpu_pjrt_put_varint(assign, 1 << 3);
    na += ttpu_pjrt_put_varint(assign + na, (uint64_t)n);
    na += ttpu_pjrt_put_varint(assign + na, 2 << 3);
    na += ttpu_pjrt_put_varint(assign + na, 1);
    na += put_bytes(assign + na, 3, comp, nc);
    size_t nb = ttpu_pjrt_put_varint(build, 4 << 3);
    nb += ttpu_pjrt_put_varint(build + nb, (uint64_t)n);
    nb += ttpu_pjrt_put_varint(build + nb, 5 << 3);
    nb += ttpu_pjrt_put_varint(build + nb, 1);
    nb += put_bytes(build + nb, 9, assign, na);
    unsigned char head[16];
    size_t nh = ttpu_pjrt_put_varint(head, 3 << 3 | 2);
    nh += ttpu_pjrt_put_varint(head + nh, nb);
    if (nh + nb <= cap) {
      memcpy(buf, head, nh);
      memcpy(buf + nh, build, nb);
      out = nh + nb;
    }
  }
  free(ids);
  free(comp);
  free(assign);
  free(build);
  return out;
}

/* Borrows the unloaded view of a loaded executable; caller releases it
 * with executable_release. */
static ttpu_status* executable_get(const ttpu_pjrt_abi_api* api,
                                   ttpu_pjrt_abi_loaded_executable* loaded,
                                   ttpu_pjrt_abi_executable** out) {
  ttpu_pjrt_abi_get_executable_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_get_executable_args, executable);
  a.loaded_executable = loaded;
  ttpu_status* s = TTPU_PJRT_CALL(api, loaded_executable_get_executable, a);
  if (!s) *out = a.executable;
  return s;
}

static void executable_release(const ttpu_pjrt_abi_api* api,
                               ttpu_pjrt_abi_executable* e) {
  if (!e) return;
  ttpu_pjrt_abi_executable_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_executable_args, executable);
  a.executable = e;
  ttpu_status_free(TTPU_PJRT_CALL(api, executable_destroy, a));
}

static void loaded_destroy(const ttpu_pjrt_abi_api* api,
                           ttpu_pjrt_abi_loaded_executable* l) {
  if (!l) return;
  ttpu_pjrt_abi_loaded_executable_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_loaded_executable_args, executable);
  a.executable = l;
  ttpu_status_free(TTPU_PJRT_CALL(api, loaded_executable_destroy, a));
}

/* Takes ownership of `loaded` (destroyed on failure) and wraps it. */
static ttpu_status* exec_wrap(ttpu_pjrt_client* c,
                              ttpu_pjrt_abi_loaded_executable* loaded,
                              ttpu_pjrt_exec** out) {
  ttpu_pjrt_abi_executable* ex = NULL;
  ttpu_status* s = executable_get(c->api, loaded, &ex);
  if (!s) {
    ttpu_pjrt_abi_num_outputs_args n;
    TTPU_PJRT_INIT_ARGS(n, ttpu_pjrt_abi_num_outputs_args, num_outputs);
    n.executable = ex;
    s = TTPU_PJRT_CALL(c->api, executable_num_outputs, n);
    executable_release(c->api, ex);
    if (!s) {
      ttpu_pjrt_exec* e = malloc(sizeof(*e));
      if (!e) {
        s = ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of memory");
      } else {
        e->loaded = loaded;
        e->num_outputs = (int)n.num_outputs;
        e->deserialized = 0;
        atomic_init(&e->refs, 1);
        *out = e;
        return NULL;
      }
    }
  }
  loaded_destroy(c->api, loaded);
  return s;
}

ttpu_status* ttpu_pjrt_compile(ttpu_pjrt_client* c, const char* mlir,
                               size_t mlir_len, const void* options,
                               size_t options_len, ttpu_pjrt_exec** out) {
  if (!out) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!c) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "client is NULL");
  if (!mlir || mlir_len == 0)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "empty program");
  if (!options || options_len == 0) {
    options = kDefaultCompileOptions;
    options_len = sizeof(kDefaultCompileOptions);
  }
  unsigned char* merged = NULL;
  const unsigned char* suffix = c->options_suffix;
  size_t suffix_len = c->options_suffix_len;
  if (c->small_elements > 0 &&
      ttpu_pjrt_largest_tensor(mlir, mlir_len) <= c->small_elements) {
    suffix = c->small_suffix;
    suffix_len = c->small_suffix_len;
  }
  if (suffix_len) {
    /* The client's options follow the caller's: protobuf merges a
     * message's fields when its bytes are concatenated. */
    merged = malloc(options_len + suffix_len);
    if (!merged)
      return ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of memory");
    memcpy(merged, options, options_len);
    memcpy(merged + options_len, suffix, suffix_len);
    options = merged;
    options_len += suffix_len;
  }
  ttpu_pjrt_abi_program prog;
  ttpu_pjrt_program_mlir(&prog, mlir, mlir_len);

  ttpu_pjrt_abi_compile_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_compile_args, executable);
  a.client = c->client;
  a.program = &prog;
  a.compile_options = options;
  a.compile_options_size = options_len;
  ttpu_status* s = TTPU_PJRT_CALL(c->api, client_compile, a);
  free(merged);
  if (s) return s;
  return exec_wrap(c, a.executable, out);
}

ttpu_pjrt_exec* ttpu_pjrt_exec_retain(ttpu_pjrt_exec* e) {
  if (e) atomic_fetch_add(&e->refs, 1);
  return e;
}

void ttpu_pjrt_exec_destroy(ttpu_pjrt_client* c, ttpu_pjrt_exec* e) {
  if (!c || !e) return;
  if (atomic_fetch_sub(&e->refs, 1) > 1) return; /* another holder keeps it */
  loaded_destroy(c->api, e->loaded);
  free(e);
}

int ttpu_pjrt_exec_num_outputs(ttpu_pjrt_client* c, ttpu_pjrt_exec* e) {
  (void)c;
  return e ? e->num_outputs : 0;
}

ttpu_status* ttpu_pjrt_exec_serialize(ttpu_pjrt_client* c, ttpu_pjrt_exec* e,
                                      void** out, size_t* out_len) {
  if (!out || !out_len)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  *out_len = 0;
  if (!c || !e)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "NULL client or exec");
  ttpu_pjrt_abi_executable* ex = NULL;
  ttpu_status* s = executable_get(c->api, e->loaded, &ex);
  if (s) return s;
  ttpu_pjrt_abi_serialize_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_serialize_args,
                      serialized_executable_deleter);
  a.executable = ex;
  s = TTPU_PJRT_CALL(c->api, executable_serialize, a);
  if (!s) {
    /* The plugin's bytes die with its deleter; hand the caller a copy it
     * can free() like everything else we return. */
    size_t n = a.serialized_bytes_size;
    void* copy = malloc(n ? n : 1);
    if (!copy) {
      s = ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of memory");
    } else {
      if (n) memcpy(copy, a.serialized_bytes, n);
      *out = copy;
      *out_len = n;
    }
    if (a.serialized_executable_deleter)
      a.serialized_executable_deleter(a.serialized_executable);
  }
  executable_release(c->api, ex);
  return s;
}

ttpu_status* ttpu_pjrt_exec_deserialize(ttpu_pjrt_client* c, const void* data,
                                        size_t len, ttpu_pjrt_exec** out) {
  if (!out) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!c) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "client is NULL");
  if (!data || len == 0)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "empty serialized executable");
  ttpu_pjrt_abi_deserialize_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_deserialize_args,
                      overridden_serialized_compile_options_size);
  a.client = c->client;
  a.serialized_executable = data;
  a.serialized_executable_size = len;
  ttpu_status* s = TTPU_PJRT_CALL(c->api, executable_deserialize_and_load, a);
  if (s) return s;
  s = exec_wrap(c, a.loaded_executable, out);
  if (!s) (*out)->deserialized = 1;
  return s;
}

int ttpu_pjrt_exec_deserialized(const ttpu_pjrt_exec* e) {
  return e && e->deserialized;
}

ttpu_status* ttpu_pjrt_exec_memory_stats(ttpu_pjrt_client* c, ttpu_pjrt_exec* e,
                                         ttpu_pjrt_memory_stats* out) {
  if (!c || !e || !out)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "NULL argument");
  ttpu_pjrt_abi_executable* ex = NULL;
  ttpu_status* s = executable_get(c->api, e->loaded, &ex);
  if (s) return s;
  s = ttpu_pjrt_read_memory_stats(c->api, ex, out);
  executable_release(c->api, ex);
  return s;
}

const char* ttpu_pjrt_compile_options_id(void) {
  return "portable-executable-v1";
}

/* Appends one CompileOptionsProto env_option_overrides (7) map entry
 * { key (1): name, value (2): OptionOverrideProto { bool_field (2) or
 * int_field (3): v } } to buf (*len bytes used of cap). A name or value
 * too large for the entry, or an entry past the buffer's room, is an
 * internal error (the names are this file's literals). */
static ttpu_status* add_override(unsigned char* buf, size_t* len, size_t cap,
                                 const char* name, int field, int v) {
  unsigned char entry[64];
  size_t nk = strlen(name), ne = 0;
  /* key, value message (tag, length, field, value), and put_bytes' tag and length */
  if (nk > sizeof(entry) - 6 || v < 0 || v > 127 || *len + nk + 6 + 2 > cap)
    return ttpu_status_make(TTPU_INTERNAL, "compile option override %s=%d does not fit the options", name, v);
  entry[ne++] = 1 << 3 | 2;
  entry[ne++] = (unsigned char)nk;
  memcpy(entry + ne, name, nk);
  ne += nk;
  entry[ne++] = 2 << 3 | 2;
  entry[ne++] = 2;
  entry[ne++] = (unsigned char)(field << 3 | 0);
  entry[ne++] = (unsigned char)v;
  *len += put_bytes(buf + *len, 7, entry, ne);
  return NULL;
}

/* The options identity: the portable options, then each CPU setting. */
static void set_options_id(ttpu_pjrt_client* c) {
  int level = c->opt_level;
  size_t cap = sizeof(c->options_id);
  int n = snprintf(c->options_id, cap, "%s", ttpu_pjrt_compile_options_id());
  if (!c->caps.host_code || n < 0) return;
  n += snprintf(c->options_id + n, cap - (size_t)n, "+no-xnnpack");
  if (level >= 0 && (size_t)n < cap)
    n += snprintf(c->options_id + n, cap - (size_t)n, "+backend-opt-%d", level);
  if (c->small_elements > 0 && (size_t)n < cap)
    snprintf(c->options_id + n, cap - (size_t)n, "+loop-emitters-%lld",
             (long long)c->small_elements);
}

/* The small programs' suffix: the client's, and XLA's older loop emitters. */
static ttpu_status* build_small_suffix(ttpu_pjrt_client* c) {
  c->small_suffix_len = 0;
  if (c->small_elements <= 0) return NULL;
  memcpy(c->small_suffix, c->options_suffix, c->options_suffix_len);
  c->small_suffix_len = c->options_suffix_len;
  ttpu_status* st = add_override(c->small_suffix, &c->small_suffix_len,
                                 sizeof(c->small_suffix),
                                 "xla_cpu_use_fusion_emitters", 2, 0);
  if (st) c->small_suffix_len = 0;
  return st;
}

/* The CPU plugin's options, as overrides: unlike a DebugOptions message,
 * they leave every other debug option at the plugin's default.
 * - XNNPACK off: the plugin's XNNPACK matrix products keep their operands'
 *   packed copies keyed by address, so a product run again after its
 *   operand was written in place (a donated parameter: an optimizer step)
 *   reads the old values. Eigen's products read the operand each time.
 * - the code generator's optimization level, where one is given. */
ttpu_status* ttpu_pjrt_client_set_opt_level(ttpu_pjrt_client* c, int level) {
  if (!c) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "client is NULL");
  if (level < -1 || level > 3)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "optimization level %d: expected 0-3, or -1 for "
                            "the plugin's default",
                            level);
  c->options_suffix_len = 0;
  if (!c->caps.host_code) {
    set_options_id(c);
    if (level < 0) return NULL;
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "an optimization level applies to the CPU plugin "
                            "only (this client's platform is %s)",
                            c->platform_name ? c->platform_name : "unknown");
  }
  size_t cap = sizeof(c->options_suffix);
  ttpu_status* st = add_override(c->options_suffix, &c->options_suffix_len, cap,
                                 "xla_cpu_use_xnnpack", 2, 0);
  if (!st && level >= 0)
    st = add_override(c->options_suffix, &c->options_suffix_len, cap,
                      "xla_backend_optimization_level", 3, level);
  if (!st) st = build_small_suffix(c);
  if (st) {
    c->options_suffix_len = c->small_suffix_len = 0;
    return st;
  }
  c->opt_level = level;
  set_options_id(c);
  return NULL;
}

/* XLA's CPU code generator has two ways to emit a fusion's loops: its
 * newer fusion emitters (the plugin's default) and its older elemental
 * loop emitters. For small tensors the older ones compile in about 60% of
 * the time with no run-time difference, and for large ones they run
 * reductions several times slower (docs/performance.md, "Small
 * programs"). So a program whose every tensor holds at most max_elements
 * elements compiles with the older ones. */
ttpu_status* ttpu_pjrt_client_set_small_programs(ttpu_pjrt_client* c,
                                                 int64_t max_elements) {
  if (!c) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "client is NULL");
  if (max_elements < 0)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "small programs: %lld elements: expected 0 (off) "
                            "or more", (long long)max_elements);
  if (!c->caps.host_code) {
    if (max_elements == 0) return NULL;
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "small programs' loop emitters apply to the CPU "
                            "plugin only (this client's platform is %s)",
                            c->platform_name ? c->platform_name : "unknown");
  }
  c->small_elements = max_elements;
  ttpu_status* st = build_small_suffix(c);
  if (st) c->small_elements = 0;
  set_options_id(c);
  return st;
}

/* Elements of the largest tensor type `tensor<AxBx...xT>` in a StableHLO
 * text; a dimension that is not a number (`?`) counts as unbounded. */
int64_t ttpu_pjrt_largest_tensor(const char* text, size_t len) {
  static const char kTag[] = "tensor<";
  const size_t nt = sizeof(kTag) - 1;
  int64_t best = 0;
  const char* end = text + len;
  const char* p = text;
  while (p && (size_t)(end - p) >= nt) {
    const char* hit = memchr(p, 't', (size_t)(end - p));
    if (!hit || (size_t)(end - hit) < nt) break;
    p = hit + 1;
    if (memcmp(hit, kTag, nt)) continue;
    const char* q = hit + nt;
    int64_t n = 1;
    for (;;) {
      if (q < end && *q == '?') return INT64_MAX;
      if (q >= end || *q < '0' || *q > '9') break;
      int64_t d = 0;
      while (q < end && *q >= '0' && *q <= '9') {
        d = d > (INT64_MAX - 9) / 10 ? INT64_MAX / 10 : d * 10 + (*q - '0');
        ++q;
      }
      if (q >= end || *q != 'x') break; /* a number that is not a dimension */
      ++q;
      n = d != 0 && n > INT64_MAX / d ? INT64_MAX : n * d;
    }
    if (n > best) best = n;
    p = q;
  }
  return best;
}

const char* ttpu_pjrt_client_options_id(const ttpu_pjrt_client* c) {
  return c && c->options_id[0] ? c->options_id
                               : ttpu_pjrt_compile_options_id();
}
