/* client.c - a PJRT client and its addressable devices. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pjrt_internal.h"

static char* dup_n(const char* s, size_t n) {
  char* r = malloc(n + 1);
  if (!r) return NULL;
  if (n) memcpy(r, s, n);
  r[n] = 0;
  return r;
}

/* Asks a client for one of its strings; *out is malloc'ed (NUL-terminated,
 * the plugin's is not). */
static ttpu_status* client_string(
    ttpu_pjrt_client* c,
    ttpu_pjrt_abi_error* (*fn)(ttpu_pjrt_abi_client_string_args*),
    const char* what, char** out) {
  ttpu_pjrt_abi_client_string_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_client_string_args, str_size);
  a.client = c->client;
  ttpu_status* s = ttpu_pjrt_status_from_error(c->api, fn(&a), what);
  if (s) return s;
  *out = dup_n(a.str ? a.str : "", a.str ? a.str_size : 0);
  return *out ? NULL
              : ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of memory");
}

/* The global id of every addressable device: a program spanning several
 * devices (collectives) names them by id in its device assignment. A
 * plugin without the description slots gets its indices, which is what
 * the ids of one process's devices are on the CPU plugin. */
static ttpu_status* read_device_ids(ttpu_pjrt_client* c) {
  c->device_ids = malloc((size_t)c->num_devices * sizeof(*c->device_ids));
  if (!c->device_ids)
    return ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of memory");
  int have = TTPU_PJRT_HAS(c->api, device_get_description) &&
             TTPU_PJRT_HAS(c->api, device_description_id);
  for (int i = 0; i < c->num_devices; i++) {
    c->device_ids[i] = i;
    if (!have) continue;
    ttpu_pjrt_abi_device_description_args g;
    TTPU_PJRT_INIT_ARGS(g, ttpu_pjrt_abi_device_description_args,
                        device_description);
    g.device = c->devices[i];
    ttpu_status* s = TTPU_PJRT_CALL(c->api, device_get_description, g);
    if (s) return s;
    ttpu_pjrt_abi_device_id_args a;
    TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_device_id_args, id);
    a.device_description = g.device_description;
    s = TTPU_PJRT_CALL(c->api, device_description_id, a);
    if (s) return s;
    c->device_ids[i] = a.id;
  }
  return NULL;
}

void ttpu_pjrt_plugin_caps(const ttpu_pjrt_plugin* p, const char* platform,
                           ttpu_pjrt_caps* k) {
  const ttpu_pjrt_abi_api* api = p->api;
  memset(k, 0, sizeof(*k));
  if (!platform) platform = "";
  k->host_code = !strcasecmp(platform, "cpu") || !strcasecmp(platform, "host");
  k->serialize_executables = TTPU_PJRT_HAS(api, executable_serialize) &&
                             TTPU_PJRT_HAS(api, executable_deserialize_and_load);
  k->topology_compile = TTPU_PJRT_HAS(api, compile) &&
                        TTPU_PJRT_HAS(api, topology_description_create) &&
                        TTPU_PJRT_HAS(api, topology_description_destroy);
  k->memory_stats = TTPU_PJRT_HAS(api, device_memory_stats);
  k->cost_analysis = TTPU_PJRT_HAS(api, executable_get_cost_analysis);
  k->cross_process_collectives = !k->host_code;
  k->host_pointers = k->host_code && TTPU_PJRT_HAS(api, buffer_unsafe_pointer);
}

static void probe_caps(ttpu_pjrt_client* c) {
  ttpu_pjrt_plugin_caps(c->plugin, c->platform_name, &c->caps);
}

const ttpu_pjrt_caps* ttpu_pjrt_client_caps(const ttpu_pjrt_client* c) {
  return &c->caps;
}

ttpu_status* ttpu_pjrt_client_create(ttpu_pjrt_plugin* p, int cpu_device_count,
                                     ttpu_pjrt_client** out) {
  if (!out) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!p) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "plugin is NULL");
  if (cpu_device_count < 0)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "cpu_device_count must be >= 0, got %d",
                            cpu_device_count);
  const ttpu_pjrt_abi_api* api = p->api;
  ttpu_pjrt_client* c = calloc(1, sizeof(*c));
  if (!c) return ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of memory");
  c->opt_level = -1;
  c->plugin = p;
  c->api = api;

  static const char kDeviceCount[] = "cpu_device_count";
  ttpu_pjrt_abi_named_value opt;
  TTPU_PJRT_INIT_ARGS(opt, ttpu_pjrt_abi_named_value, value_size);
  opt.name = kDeviceCount;
  opt.name_size = sizeof(kDeviceCount) - 1;
  opt.type = TTPU_PJRT_NV_INT64;
  opt.value.int64_value = cpu_device_count;
  opt.value_size = 1;

  ttpu_pjrt_abi_client_create_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_client_create_args,
                      kv_try_get_user_arg);
  if (cpu_device_count > 0) {
    a.create_options = &opt;
    a.num_options = 1;
  }
  ttpu_status* s = TTPU_PJRT_CALL(api, client_create, a);
  if (s) {
    free(c);
    return ttpu_status_annotate(s, "creating a client of %s", p->path);
  }
  c->client = a.client;

  s = client_string(c, api->client_platform_name, "Client_PlatformName",
                    &c->platform_name);
  if (!s)
    s = client_string(c, api->client_platform_version,
                      "Client_PlatformVersion", &c->platform_version);
  if (!s) {
    ttpu_pjrt_abi_client_devices_args d;
    TTPU_PJRT_INIT_ARGS(d, ttpu_pjrt_abi_client_devices_args, num_devices);
    d.client = c->client;
    s = TTPU_PJRT_CALL(api, client_addressable_devices, d);
    if (!s && d.num_devices == 0)
      s = ttpu_status_make(TTPU_FAILED_PRECONDITION,
                           "PJRT plugin %s has no addressable devices",
                           p->path);
    if (!s) {
      /* The plugin's array is only valid while the client lives; a copy
       * keeps our indices stable and independent of that detail. */
      c->devices = malloc(d.num_devices * sizeof(*c->devices));
      if (!c->devices) {
        s = ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of memory");
      } else {
        memcpy(c->devices, d.devices, d.num_devices * sizeof(*c->devices));
        c->num_devices = (int)d.num_devices;
        s = read_device_ids(c);
      }
    }
  }
  if (s) {
    ttpu_pjrt_client_destroy(c);
    return s;
  }
  probe_caps(c);
  *out = c;
  return NULL;
}

void ttpu_pjrt_client_destroy(ttpu_pjrt_client* c) {
  if (!c) return;
  if (c->client) {
    ttpu_pjrt_abi_client_args a;
    TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_client_args, client);
    a.client = c->client;
    ttpu_status_free(TTPU_PJRT_CALL(c->api, client_destroy, a));
  }
  free(c->devices);
  free(c->device_ids);
  free(c->pinned);
  free(c->platform_name);
  free(c->platform_version);
  free(c);
}

int ttpu_pjrt_client_device_count(const ttpu_pjrt_client* c) {
  return c ? c->num_devices : 0;
}

const char* ttpu_pjrt_client_platform_name(const ttpu_pjrt_client* c) {
  return c && c->platform_name ? c->platform_name : "";
}

const char* ttpu_pjrt_client_platform_version(const ttpu_pjrt_client* c) {
  return c && c->platform_version ? c->platform_version : "";
}

int ttpu_pjrt_client_device_id(const ttpu_pjrt_client* c, int device) {
  if (!c || device < 0 || device >= c->num_devices) return -1;
  return c->device_ids ? c->device_ids[device] : device;
}

ttpu_status* ttpu_pjrt_client_device(const ttpu_pjrt_client* c, int device,
                                     ttpu_pjrt_abi_device** out) {
  if (!c) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "client is NULL");
  if (device < 0 || device >= c->num_devices)
    return ttpu_status_make(TTPU_INDEX_ERROR,
                            "device index %d out of range (the client has %d "
                            "device%s)",
                            device, c->num_devices,
                            c->num_devices == 1 ? "" : "s");
  *out = c->devices[device];
  return NULL;
}

ttpu_status* ttpu_pjrt_client_device_kind(const ttpu_pjrt_client* c,
                                          int device, char* buf, size_t n) {
  if (!buf || !n)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "no room for the kind");
  buf[0] = 0;
  ttpu_pjrt_abi_device* dev;
  ttpu_status* s = ttpu_pjrt_client_device(c, device, &dev);
  if (s) return s;
  ttpu_pjrt_abi_device_description_args g;
  TTPU_PJRT_INIT_ARGS(g, ttpu_pjrt_abi_device_description_args,
                      device_description);
  g.device = dev;
  s = TTPU_PJRT_CALL(c->api, device_get_description, g);
  if (s) return s;
  ttpu_pjrt_abi_device_kind_args k;
  TTPU_PJRT_INIT_ARGS(k, ttpu_pjrt_abi_device_kind_args, kind_size);
  k.device_description = g.device_description;
  s = TTPU_PJRT_CALL(c->api, device_description_kind, k);
  if (s) return s;
  size_t len = k.kind ? k.kind_size : 0;
  if (len > n - 1) len = n - 1;
  if (len) memcpy(buf, k.kind, len);
  buf[len] = 0;
  return NULL;
}

ttpu_status* ttpu_pjrt_client_device_memory(const ttpu_pjrt_client* c,
                                            int device,
                                            ttpu_pjrt_device_memory* out) {
  out->bytes_in_use = -1;
  out->bytes_limit = -1;
  ttpu_pjrt_abi_device* dev;
  ttpu_status* s = ttpu_pjrt_client_device(c, device, &dev);
  if (s) return s;
  ttpu_pjrt_abi_device_memory_stats_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_device_memory_stats_args,
                      peak_pool_bytes_is_set);
  a.device = dev;
  s = TTPU_PJRT_CALL(c->api, device_memory_stats, a);
  if (s) {
    /* Plugins without an allocator of their own (the CPU plugin) say so
     * with an error: report it as what it is, not as a failure. */
    ttpu_code code = ttpu_status_code(s);
    if (code == TTPU_PLUGIN_ERROR || code == TTPU_UNIMPLEMENTED) {
      ttpu_status* u = ttpu_status_make(
          TTPU_UNIMPLEMENTED, "the plugin reports no device memory: %s",
          ttpu_status_message(s));
      ttpu_status_free(s);
      return u;
    }
    return s;
  }
  out->bytes_in_use = a.bytes_in_use;
  if (a.bytes_limit_is_set) out->bytes_limit = a.bytes_limit;
  return NULL;
}
