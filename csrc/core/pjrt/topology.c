/* topology.c - ahead-of-time compilation: topologies, PJRT_Compile, and
 * what a compiled (not loaded) executable tells about itself. */
#include <stdlib.h>
#include <string.h>

#include "pjrt_internal.h"

struct ttpu_pjrt_topology {
  const ttpu_pjrt_abi_api* api;    /* borrowed from the plugin */
  ttpu_pjrt_abi_topology* topology; /* owned */
  char* name;                       /* owned, as asked for */
  char* platform_name;              /* owned */
  char* platform_version;           /* owned */
  char* device_kind;                /* owned */
  int num_devices;
};

/* ttpu_pjrt_executable* IS the plugin's PJRT_Executable* (cast): nothing of
 * ours to allocate. */

/* A NUL-terminated copy of a plugin string ("" for none). */
static char* copy_str(const char* s, size_t n) {
  char* out = malloc(n + 1);
  if (!out) return NULL;
  if (n) memcpy(out, s, n);
  out[n] = 0;
  return out;
}

/* Reads one of the topology's string properties; a plugin that lacks the
 * slot or fails yields "" (these strings only decorate reports). */
static char* topology_string(ttpu_pjrt_topology* t, int version) {
  ttpu_pjrt_abi_topology_string_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_topology_string_args, str_size);
  a.topology = t->topology;
  ttpu_status* s =
      version ? TTPU_PJRT_CALL(t->api, topology_description_platform_version, a)
              : TTPU_PJRT_CALL(t->api, topology_description_platform_name, a);
  if (s) {
    ttpu_status_free(s);
    return copy_str("", 0);
  }
  return copy_str(a.str, a.str ? a.str_size : 0);
}

/* Device count and the first device's kind. */
static ttpu_status* describe_devices(ttpu_pjrt_topology* t) {
  ttpu_pjrt_abi_topology_devices_args d;
  TTPU_PJRT_INIT_ARGS(d, ttpu_pjrt_abi_topology_devices_args,
                      num_descriptions);
  d.topology = t->topology;
  ttpu_status* s =
      TTPU_PJRT_CALL(t->api, topology_description_get_device_descriptions, d);
  if (s) return s;
  t->num_devices = (int)d.num_descriptions;
  const char* kind = "";
  size_t kind_len = 0;
  if (d.num_descriptions > 0) {
    ttpu_pjrt_abi_device_kind_args k;
    TTPU_PJRT_INIT_ARGS(k, ttpu_pjrt_abi_device_kind_args, kind_size);
    k.device_description = d.descriptions[0];
    s = TTPU_PJRT_CALL(t->api, device_description_kind, k);
    if (s) {
      ttpu_status_free(s); /* the kind only decorates reports */
    } else if (k.kind) {
      kind = k.kind;
      kind_len = k.kind_size;
    }
  }
  t->device_kind = copy_str(kind, kind_len);
  return t->device_kind
             ? NULL
             : ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of memory");
}

ttpu_status* ttpu_pjrt_topology_create(ttpu_pjrt_plugin* p, const char* name,
                                       ttpu_pjrt_topology** out) {
  if (!out) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!p || !name || !*name)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "a plugin and a topology name are required");
  const ttpu_pjrt_abi_api* api = p->api;
  if (!TTPU_PJRT_HAS(api, compile) ||
      !TTPU_PJRT_HAS(api, topology_description_destroy))
    return ttpu_status_make(
        TTPU_UNIMPLEMENTED,
        "PJRT plugin %s (ABI %d.%d) cannot compile for a topology "
        "(no PJRT_TopologyDescription_Create/PJRT_Compile)",
        p->path, p->major, p->minor);
  ttpu_pjrt_abi_topology_create_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_topology_create_args, topology);
  a.topology_name = name;
  a.topology_name_size = strlen(name);
  ttpu_status* s = TTPU_PJRT_CALL(api, topology_description_create, a);
  if (s) return ttpu_status_annotate(s, "creating topology '%s'", name);

  ttpu_pjrt_topology* t = calloc(1, sizeof(*t));
  if (!t) {
    ttpu_pjrt_abi_topology_args d;
    TTPU_PJRT_INIT_ARGS(d, ttpu_pjrt_abi_topology_args, topology);
    d.topology = a.topology;
    ttpu_status_free(TTPU_PJRT_CALL(api, topology_description_destroy, d));
    return ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of memory");
  }
  t->api = api;
  t->topology = a.topology;
  t->name = strdup(name);
  t->platform_name = topology_string(t, 0);
  t->platform_version = topology_string(t, 1);
  s = describe_devices(t);
  if (!s && (!t->name || !t->platform_name || !t->platform_version))
    s = ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of memory");
  if (s) {
    ttpu_pjrt_topology_destroy(t);
    return ttpu_status_annotate(s, "describing topology '%s'", name);
  }
  *out = t;
  return NULL;
}

void ttpu_pjrt_topology_destroy(ttpu_pjrt_topology* t) {
  if (!t) return;
  ttpu_pjrt_abi_topology_args d;
  TTPU_PJRT_INIT_ARGS(d, ttpu_pjrt_abi_topology_args, topology);
  d.topology = t->topology;
  ttpu_status_free(TTPU_PJRT_CALL(t->api, topology_description_destroy, d));
  free(t->name);
  free(t->platform_name);
  free(t->platform_version);
  free(t->device_kind);
  free(t);
}

const char* ttpu_pjrt_topology_name(const ttpu_pjrt_topology* t) {
  return t && t->name ? t->name : "";
}
const char* ttpu_pjrt_topology_platform_name(const ttpu_pjrt_topology* t) {
  return t && t->platform_name ? t->platform_name : "";
}
const char* ttpu_pjrt_topology_platform_version(const ttpu_pjrt_topology* t) {
  return t && t->platform_version ? t->platform_version : "";
}
const char* ttpu_pjrt_topology_device_kind(const ttpu_pjrt_topology* t) {
  return t && t->device_kind ? t->device_kind : "";
}
int ttpu_pjrt_topology_device_count(const ttpu_pjrt_topology* t) {
  return t ? t->num_devices : 0;
}

ttpu_status* ttpu_pjrt_topology_compile(ttpu_pjrt_topology* t,
                                        const char* mlir, size_t mlir_len,
                                        const void* options,
                                        size_t options_len,
                                        ttpu_pjrt_executable** out) {
  if (!out) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!t) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "topology is NULL");
  if (!mlir || mlir_len == 0)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "empty program");
  /* An empty CompileOptionsProto aborts XLA inside the plugin. */
  if (!options || options_len == 0)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "compile options are required");
  ttpu_pjrt_abi_program prog;
  ttpu_pjrt_program_mlir(&prog, mlir, mlir_len);

  ttpu_pjrt_abi_topology_compile_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_topology_compile_args, executable);
  a.topology = t->topology;
  a.program = &prog;
  a.compile_options = options;
  a.compile_options_size = options_len;
  ttpu_status* s = TTPU_PJRT_CALL(t->api, compile, a);
  if (s) return s;
  *out = (ttpu_pjrt_executable*)a.executable;
  return NULL;
}

void ttpu_pjrt_executable_destroy(ttpu_pjrt_topology* t,
                                  ttpu_pjrt_executable* e) {
  if (!t || !e) return;
  ttpu_pjrt_abi_executable_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_executable_args, executable);
  a.executable = (ttpu_pjrt_abi_executable*)e;
  ttpu_status_free(TTPU_PJRT_CALL(t->api, executable_destroy, a));
}

void ttpu_pjrt_program_mlir(ttpu_pjrt_abi_program* prog, const char* mlir,
                            size_t mlir_len) {
  static const char kFormat[] = "mlir";
  TTPU_PJRT_INIT_ARGS(*prog, ttpu_pjrt_abi_program, format_size);
  /* The ABI's field is non-const because other calls write it; compile
   * only reads it. */
  prog->code = (char*)mlir;
  prog->code_size = mlir_len;
  prog->format = kFormat;
  prog->format_size = sizeof(kFormat) - 1;
}

ttpu_status* ttpu_pjrt_read_memory_stats(const ttpu_pjrt_abi_api* api,
                                         ttpu_pjrt_abi_executable* ex,
                                         ttpu_pjrt_memory_stats* out) {
  if (!TTPU_PJRT_HAS(api, executable_get_compiled_memory_stats))
    return ttpu_pjrt_missing_slot(api, "executable_get_compiled_memory_stats");
  ttpu_pjrt_abi_memory_stats_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_memory_stats_args,
                      peak_memory_in_bytes);
  a.executable = ex;
  ttpu_status* s = TTPU_PJRT_CALL(api, executable_get_compiled_memory_stats, a);
  if (s) {
    /* Plugins that lack the feature answer with an error; callers only
     * need to know it is unavailable. */
    ttpu_status* r = ttpu_status_make(TTPU_UNIMPLEMENTED, "%s",
                                      ttpu_status_message(s));
    ttpu_status_free(s);
    return r;
  }
  out->argument_bytes = a.argument_size_in_bytes;
  out->output_bytes = a.output_size_in_bytes;
  out->alias_bytes = a.alias_size_in_bytes;
  out->temp_bytes = a.temp_size_in_bytes;
  out->generated_code_bytes = a.generated_code_size_in_bytes;
  out->peak_bytes = a.peak_memory_in_bytes;
  return NULL;
}

ttpu_status* ttpu_pjrt_executable_memory_stats(ttpu_pjrt_topology* t,
                                               ttpu_pjrt_executable* e,
                                               ttpu_pjrt_memory_stats* out) {
  if (!t || !e || !out)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "NULL argument");
  return ttpu_pjrt_read_memory_stats(t->api, (ttpu_pjrt_abi_executable*)e,
                                     out);
}

ttpu_status* ttpu_pjrt_executable_cost_analysis(ttpu_pjrt_topology* t,
                                                ttpu_pjrt_executable* e,
                                                ttpu_pjrt_cost_fn fn,
                                                void* user) {
  if (!t || !e || !fn)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "NULL argument");
  ttpu_pjrt_abi_cost_analysis_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_cost_analysis_args, properties);
  a.executable = (ttpu_pjrt_abi_executable*)e;
  ttpu_status* s = TTPU_PJRT_CALL(t->api, executable_get_cost_analysis, a);
  if (s) return s;
  for (size_t i = 0; i < a.num_properties; i++) {
    const ttpu_pjrt_abi_named_value* v = &a.properties[i];
    double x;
    switch (v->type) {
      case TTPU_PJRT_NV_FLOAT:
        x = v->value.float_value;
        break;
      case TTPU_PJRT_NV_INT64:
        x = (double)v->value.int64_value;
        break;
      default:
        continue; /* strings and lists carry no cost figure */
    }
    fn(user, v->name, v->name_size, x);
  }
  return NULL;
}

ttpu_status* ttpu_pjrt_executable_serialize(ttpu_pjrt_topology* t,
                                            ttpu_pjrt_executable* e,
                                            void** out, size_t* out_len) {
  if (!out || !out_len)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  *out_len = 0;
  if (!t || !e)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "NULL topology or exec");
  ttpu_pjrt_abi_serialize_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_serialize_args,
                      serialized_executable_deleter);
  a.executable = (ttpu_pjrt_abi_executable*)e;
  ttpu_status* s = TTPU_PJRT_CALL(t->api, executable_serialize, a);
  if (s) return s;
  /* The plugin's bytes die with its deleter: hand back a free()able copy. */
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
  return s;
}
