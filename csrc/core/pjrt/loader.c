/* loader.c - finding, loading and version-checking a PJRT plugin. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pjrt_internal.h"
#include "../base/env.h"

#define CPU_PLUGIN_REL "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so"
#define CPU_PLUGIN_PIP "xla-cpu-pjrt==0.0.1"
#define LIBTPU_REL "libtpu/libtpu.so"
/* The XLA CUDA plugins (jax-cuda13-pjrt, jax-cuda12-pjrt), newest first. */
static const char* const CUDA_PLUGIN_RELS[] = {
    "jax_plugins/xla_cuda13/xla_cuda_plugin.so",
    "jax_plugins/xla_cuda12/xla_cuda_plugin.so",
};

static int is_file(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int exists(const char* path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* Returns a malloc'ed dir/rel when it names a file, else NULL. */
static char* find_in(const char* const* dirs, const char* rel) {
  for (size_t i = 0; dirs && dirs[i]; i++) {
    char* p = NULL;
    if (asprintf(&p, "%s/%s", dirs[i], rel) < 0) return NULL;
    if (is_file(p)) return p;
    free(p);
  }
  return NULL;
}

ttpu_status* ttpu_plugin_find(const char* const* search_dirs, char** out) {
  if (!out) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  const char* env = ttpu_env_plugin_path();
  if (env) {
    /* An explicit choice that is wrong must fail loudly, not fall back to
     * some other plugin the user did not ask for. */
    if (!is_file(env))
      return ttpu_status_make(TTPU_NOT_FOUND,
                              "TORCHTPU_PLUGIN=%s: no such file", env);
    *out = strdup(env);
    return *out ? NULL
                : ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of memory");
  }
  /* /dev/accel* is how TPU VMs expose chips; v5e+ use vfio. Without
   * libtpu installed we still run on the CPU plugin rather than fail. */
  if (exists("/dev/accel0") || exists("/dev/vfio")) {
    char* p = find_in(search_dirs, LIBTPU_REL);
    if (p) {
      *out = p;
      return NULL;
    }
  }
  /* An NVIDIA driver with a CUDA plugin installed (the gpu extra): the
   * GPU. Without the plugin the CPU one serves, as for TPUs above. */
  if (exists("/dev/nvidiactl")) {
    for (size_t i = 0; i < sizeof CUDA_PLUGIN_RELS / sizeof *CUDA_PLUGIN_RELS;
         i++) {
      char* p = find_in(search_dirs, CUDA_PLUGIN_RELS[i]);
      if (p) {
        *out = p;
        return NULL;
      }
    }
  }
  char* p = find_in(search_dirs, CPU_PLUGIN_REL);
  if (p) {
    *out = p;
    return NULL;
  }
  /* Say where we looked: the usual cause is a different Python env. */
  size_t cap = 1;
  for (size_t i = 0; search_dirs && search_dirs[i]; i++)
    cap += strlen(search_dirs[i]) + 2;
  char* where = malloc(cap);
  if (where) {
    where[0] = 0;
    for (size_t i = 0; search_dirs && search_dirs[i]; i++) {
      if (i) strcat(where, ", ");
      strcat(where, search_dirs[i]);
    }
  }
  ttpu_status* s = ttpu_status_make(
      TTPU_NOT_FOUND,
      "no PJRT plugin found (looked for %s in: %s). Install the CPU plugin "
      "with `pip install %s`, or set TORCHTPU_PLUGIN to the path of a PJRT "
      "plugin library",
      CPU_PLUGIN_REL, (where && *where) ? where : "(no search dirs)",
      CPU_PLUGIN_PIP);
  free(where);
  return s;
}

ttpu_status* ttpu_pjrt_plugin_load(const char* path, ttpu_pjrt_plugin** out) {
  if (!out) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!path || !*path)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "plugin path is empty");
  /* A bare name is resolved by the dynamic loader's search path, so only
   * a path with a slash can be checked for existence up front. */
  if (strchr(path, '/') && !exists(path))
    return ttpu_status_make(TTPU_NOT_FOUND, "PJRT plugin %s: no such file",
                            path);

  /* XLA plugins log at INFO level to stderr unless told otherwise: keep
   * their warnings and errors only, unless the process chose a level. */
  setenv("TF_CPP_MIN_LOG_LEVEL", "1", 0);
  dlerror();
  /* RTLD_NODELETE: XLA plugins start threads and register static state;
   * unmapping one at dlclose can crash the process later. Keeping it mapped
   * lets unload dlclose (balancing the refcount) safely. RTLD_LOCAL keeps
   * the plugin's many symbols out of the global namespace. */
  void* dl = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!dl) {
    const char* e = dlerror();
    return ttpu_status_make(strchr(path, '/') ? TTPU_INVALID_ARGUMENT
                                              : TTPU_NOT_FOUND,
                            "cannot load PJRT plugin %s: %s", path,
                            e ? e : "unknown dlopen error");
  }
  ttpu_status* s = NULL;
  ttpu_pjrt_abi_get_api_fn get_api;
  {
    /* POSIX sanctions this object-to-function pointer conversion. */
    void* sym = dlsym(dl, "GetPjrtApi");
    if (!sym) {
      const char* e = dlerror();
      s = ttpu_status_make(
          TTPU_INVALID_ARGUMENT,
          "%s is not a PJRT plugin: it has no GetPjrtApi symbol (%s)", path,
          e ? e : "symbol not found");
      goto fail;
    }
    memcpy(&get_api, &sym, sizeof(get_api));
  }
  const ttpu_pjrt_abi_api* api = get_api();
  if (!api) {
    s = ttpu_status_make(TTPU_FAILED_PRECONDITION,
                         "PJRT plugin %s: GetPjrtApi returned NULL", path);
    goto fail;
  }
  /* Read the version only once the table is known to contain it. */
  if (api->struct_size <
      TTPU_PJRT_STRUCT_SIZE(ttpu_pjrt_abi_api, error_get_code)) {
    s = ttpu_status_make(TTPU_FAILED_PRECONDITION,
                         "PJRT plugin %s: function table too small (%zu "
                         "bytes); torchtpu needs PJRT ABI 0.%d or newer",
                         path, api->struct_size, TTPU_PJRT_MIN_MINOR);
    goto fail;
  }
  int major = api->pjrt_api_version.major_version;
  int minor = api->pjrt_api_version.minor_version;
  if (major != 0 || minor < TTPU_PJRT_MIN_MINOR) {
    s = ttpu_status_make(TTPU_FAILED_PRECONDITION,
                         "PJRT plugin %s has ABI version %d.%d; torchtpu "
                         "needs 0.%d or newer (major 0)",
                         path, major, minor, TTPU_PJRT_MIN_MINOR);
    goto fail;
  }
  /* Every slot up to DeserializeAndLoad is used on ordinary paths; a
   * plugin without them is unusable, so say so now rather than later. */
  if (!TTPU_PJRT_HAS(api, executable_deserialize_and_load) ||
      !api->error_destroy || !api->error_message) {
    s = ttpu_status_make(TTPU_FAILED_PRECONDITION,
                         "PJRT plugin %s (ABI %d.%d): function table too "
                         "small or incomplete (%zu bytes)",
                         path, major, minor, api->struct_size);
    goto fail;
  }
  ttpu_pjrt_abi_plugin_initialize_args init;
  TTPU_PJRT_INIT_ARGS(init, ttpu_pjrt_abi_plugin_initialize_args,
                      extension_start);
  s = TTPU_PJRT_CALL(api, plugin_initialize, init);
  if (s) {
    s = ttpu_status_annotate(s, "initialising PJRT plugin %s", path);
    goto fail;
  }

  ttpu_pjrt_plugin* p = calloc(1, sizeof(*p));
  char* pcopy = strdup(path);
  if (!p || !pcopy) {
    free(p);
    free(pcopy);
    s = ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  p->dl = dl;
  p->api = api;
  p->path = pcopy;
  p->major = major;
  p->minor = minor;
  *out = p;
  return NULL;

fail:
  dlclose(dl);
  return s;
}

void ttpu_pjrt_plugin_unload(ttpu_pjrt_plugin* p) {
  if (!p) return;
  dlclose(p->dl); /* stays mapped: RTLD_NODELETE */
  free(p->path);
  free(p);
}

void ttpu_pjrt_plugin_version(const ttpu_pjrt_plugin* p, int* major,
                              int* minor) {
  if (major) *major = p ? p->major : -1;
  if (minor) *minor = p ? p->minor : -1;
}

const char* ttpu_pjrt_plugin_path(const ttpu_pjrt_plugin* p) {
  return p ? p->path : "";
}
