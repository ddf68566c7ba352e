/* pjrt_internal.h - what the files of csrc/core/pjrt share (not public).
 *
 * Handle representation: ttpu_pjrt_buffer* and ttpu_pjrt_event* ARE the
 * plugin's PJRT_Buffer* / PJRT_Event* (cast), so the hot paths allocate
 * nothing of ours. ttpu_pjrt_exec is our small struct because executing
 * needs the output count, which costs three plugin calls to ask for.
 */
#ifndef TTPU_PJRT_INTERNAL_H_
#define TTPU_PJRT_INTERNAL_H_

#include <stdatomic.h>

#include "pjrt_abi.h"
#include "ttpu_pjrt.h"

struct ttpu_pjrt_plugin {
  void* dl;                     /* dlopen handle; owned */
  const ttpu_pjrt_abi_api* api; /* borrowed from the plugin, static there */
  char* path;                   /* owned */
  int major, minor;
};

struct ttpu_pjrt_client {
  ttpu_pjrt_plugin* plugin; /* borrowed: must outlive the client */
  const ttpu_pjrt_abi_api* api;
  ttpu_pjrt_abi_client* client;  /* owned */
  ttpu_pjrt_abi_device** devices; /* owned array; devices owned by client */
  int* device_ids;  /* owned: each device's global id (device assignments) */
  int num_devices;
  char* platform_name;    /* owned */
  char* platform_version; /* owned */
  ttpu_pjrt_caps caps;    /* probed once, at creation */
  /* Appended to every compile's options (ttpu_pjrt_client_set_opt_level):
   * a CompileOptionsProto fragment that protobuf merges into the options
   * it follows. */
  unsigned char options_suffix[128];
  size_t options_suffix_len;
  /* The suffix for small programs (ttpu_pjrt_client_set_small_programs):
   * options_suffix and XLA's older loop emitters; used for a program whose
   * every tensor holds at most small_elements elements (0: never). */
  unsigned char small_suffix[192];
  size_t small_suffix_len;
  int64_t small_elements;
  int opt_level; /* the code generator's level, -1: the plugin's default */
  char options_id[96]; /* the default options' identity, for cache keys */
  /* Buffers that executions must not donate (buffer.c); a pin each. */
  ttpu_pjrt_buffer** pinned;
  int n_pinned, cap_pinned;
};

struct ttpu_pjrt_exec {
  ttpu_pjrt_abi_loaded_executable* loaded; /* owned */
  int num_outputs;
  atomic_int refs; /* holders: ttpu_pjrt_exec_retain / _destroy */
  int deserialized; /* made by ttpu_pjrt_exec_deserialize */
};

/* Whether b is pinned (never donated; buffer.c). */
int ttpu_pjrt_buffer_pinned(const ttpu_pjrt_client* c,
                            const ttpu_pjrt_buffer* b);

#define TTPU_PJRT_INIT_ARGS(var, type, last_field) \
  do {                                             \
    memset(&(var), 0, sizeof(var));                \
    (var).struct_size = TTPU_PJRT_STRUCT_SIZE(type, last_field); \
  } while (0)

/* Converts a plugin error into a status (taking ownership of err and
 * destroying it). `what` names the call for the message. NULL err -> NULL. */
ttpu_status* ttpu_pjrt_status_from_error(const ttpu_pjrt_abi_api* api,
                                         ttpu_pjrt_abi_error* err,
                                         const char* what);
/* Destroys a plugin error we cannot report (teardown paths). */
void ttpu_pjrt_error_discard(const ttpu_pjrt_abi_api* api,
                             ttpu_pjrt_abi_error* err);
/* Status for a slot the plugin's table does not provide. */
ttpu_status* ttpu_pjrt_missing_slot(const ttpu_pjrt_abi_api* api,
                                    const char* slot);

/* Calls slot `slot` of api with &args, yielding a ttpu_status* (NULL on
 * success). A slot beyond the plugin's table becomes UNIMPLEMENTED. */
#define TTPU_PJRT_CALL(api, slot, args)                          \
  (ttpu_pjrt_fault_due(#slot) ? ttpu_pjrt_fault_status(#slot)    \
                              : TTPU_PJRT_CALL_RAW(api, slot, args))
/* The same, never failed by fault injection. */
#define TTPU_PJRT_CALL_RAW(api, slot, args)                      \
  (TTPU_PJRT_HAS(api, slot)                                      \
       ? ttpu_pjrt_status_from_error((api), (api)->slot(&(args)), #slot) \
       : ttpu_pjrt_missing_slot((api), #slot))

/* Fault injection (ttpu_debug_inject_plugin_fault): whether this call of
 * `slot` is to fail instead of reaching the plugin. One relaxed atomic
 * load when nothing is armed. */
extern atomic_int ttpu_pjrt_faults_armed;
int ttpu_pjrt_fault_take(const char* slot);
static inline int ttpu_pjrt_fault_due(const char* slot) {
  return atomic_load_explicit(&ttpu_pjrt_faults_armed, memory_order_relaxed) &&
         ttpu_pjrt_fault_take(slot);
}
/* The injected error: a plugin error naming the call. */
ttpu_status* ttpu_pjrt_fault_status(const char* slot);

/* Device lookup with a bounds check; NULL status on success. */
ttpu_status* ttpu_pjrt_client_device(const ttpu_pjrt_client* c, int device,
                                     ttpu_pjrt_abi_device** out);

/* Fills a program descriptor for StableHLO MLIR text (borrowed). */
void ttpu_pjrt_program_mlir(ttpu_pjrt_abi_program* prog, const char* mlir,
                            size_t mlir_len);
/* Reads an executable's compiled memory stats (loaded or not). */
ttpu_status* ttpu_pjrt_read_memory_stats(const ttpu_pjrt_abi_api* api,
                                         ttpu_pjrt_abi_executable* ex,
                                         ttpu_pjrt_memory_stats* out);

ttpu_pjrt_abi_type ttpu_pjrt_type_from_dtype(ttpu_dtype t);
ttpu_dtype ttpu_pjrt_dtype_from_type(ttpu_pjrt_abi_type t);

#endif /* TTPU_PJRT_INTERNAL_H_ */
