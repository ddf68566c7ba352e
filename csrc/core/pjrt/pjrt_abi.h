/* pjrt_abi.h - our declaration of the subset of the PJRT C ABI we use.
 *
 * Written from the ABI (struct layouts and slot order of PJRT 0.81); not a
 * copy of the upstream header. Only the structs we pass are declared. Every
 * args struct starts with struct_size + extension_start; struct_size must be
 * the end of the last field we know (TTPU_PJRT_STRUCT_SIZE), not sizeof, so a
 * plugin can tell which fields we filled. Plugins accept sizes >= what they
 * know, so declaring against a newer ABI also works with older plugins down
 * to TTPU_PJRT_MIN_MINOR.
 *
 * The function table (ttpu_pjrt_abi_api) names every slot up to the last one
 * we use; slots we do not call are void* so they still take their place.
 * Slots are only ever appended, so check the table's struct_size covers a
 * slot before calling it (TTPU_PJRT_HAS).
 */
#ifndef TTPU_PJRT_ABI_H_
#define TTPU_PJRT_ABI_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TTPU_PJRT_STRUCT_SIZE(type, last_field) \
  (offsetof(type, last_field) + sizeof(((type*)0)->last_field))

/* Opaque plugin objects. */
typedef struct ttpu_pjrt_abi_error ttpu_pjrt_abi_error;
typedef struct ttpu_pjrt_abi_client ttpu_pjrt_abi_client;
typedef struct ttpu_pjrt_abi_device ttpu_pjrt_abi_device;
typedef struct ttpu_pjrt_abi_buffer ttpu_pjrt_abi_buffer;
typedef struct ttpu_pjrt_abi_event ttpu_pjrt_abi_event;
typedef struct ttpu_pjrt_abi_executable ttpu_pjrt_abi_executable;
typedef struct ttpu_pjrt_abi_loaded_executable ttpu_pjrt_abi_loaded_executable;
typedef struct ttpu_pjrt_abi_serialized ttpu_pjrt_abi_serialized;

/* Element types, numbered as the ABI numbers them. */
typedef enum {
  TTPU_PJRT_T_INVALID = 0,
  TTPU_PJRT_T_PRED = 1,
  TTPU_PJRT_T_S8 = 2,
  TTPU_PJRT_T_S16 = 3,
  TTPU_PJRT_T_S32 = 4,
  TTPU_PJRT_T_S64 = 5,
  TTPU_PJRT_T_U8 = 6,
  TTPU_PJRT_T_U16 = 7,
  TTPU_PJRT_T_U32 = 8,
  TTPU_PJRT_T_U64 = 9,
  TTPU_PJRT_T_F16 = 10,
  TTPU_PJRT_T_F32 = 11,
  TTPU_PJRT_T_F64 = 12,
  TTPU_PJRT_T_BF16 = 13,
} ttpu_pjrt_abi_type;

/* Error codes (absl status codes); we only single out this one. */
#define TTPU_PJRT_CODE_RESOURCE_EXHAUSTED 8

typedef enum {
  TTPU_PJRT_NV_STRING = 0,
  TTPU_PJRT_NV_INT64 = 1,
  TTPU_PJRT_NV_INT64_LIST = 2,
  TTPU_PJRT_NV_FLOAT = 3,
  TTPU_PJRT_NV_BOOL = 4,
} ttpu_pjrt_abi_named_value_type;

/* Host buffer semantics: the plugin copies during the call, so the host
 * memory may be freed as soon as BufferFromHostBuffer returns. */
#define TTPU_PJRT_HOST_IMMUTABLE_ONLY_DURING_CALL 0

typedef struct {
  size_t struct_size;
  void* extension_start;
  int major_version;
  int minor_version;
} ttpu_pjrt_abi_version;

typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_error* error;
} ttpu_pjrt_abi_error_destroy_args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  const ttpu_pjrt_abi_error* error;
  const char* message; /* out, borrowed from the error */
  size_t message_size; /* out */
} ttpu_pjrt_abi_error_message_args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  const ttpu_pjrt_abi_error* error;
  int code; /* out */
} ttpu_pjrt_abi_error_code_args;

typedef struct {
  size_t struct_size;
  void* extension_start;
} ttpu_pjrt_abi_plugin_initialize_args;

/* One args layout serves Event_Destroy, Event_Error and Event_Await. */
typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_event* event;
} ttpu_pjrt_abi_event_args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_event* event;
  bool is_ready; /* out */
} ttpu_pjrt_abi_event_is_ready_args;

/* Event_OnReady: callback(error, user_arg) runs once the event is ready,
 * on a plugin thread (or at once, in the call, when it already is); the
 * callback owns the error (NULL on success). */
typedef void (*ttpu_pjrt_abi_on_ready_fn)(ttpu_pjrt_abi_error* error,
                                          void* user_arg);
typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_event* event;
  ttpu_pjrt_abi_on_ready_fn callback;
  void* user_arg;
} ttpu_pjrt_abi_event_on_ready_args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  const char* name;
  size_t name_size;
  ttpu_pjrt_abi_named_value_type type;
  union {
    const char* string_value;
    int64_t int64_value;
    const int64_t* int64_array_value;
    float float_value;
    bool bool_value;
  } value;
  size_t value_size;
} ttpu_pjrt_abi_named_value;

typedef struct {
  size_t struct_size;
  void* extension_start;
  const ttpu_pjrt_abi_named_value* create_options;
  size_t num_options;
  void* kv_get_callback; /* multi-process only: unused */
  void* kv_get_user_arg;
  void* kv_put_callback;
  void* kv_put_user_arg;
  ttpu_pjrt_abi_client* client; /* out */
  void* kv_try_get_callback;
  void* kv_try_get_user_arg;
} ttpu_pjrt_abi_client_create_args;

/* Client_Destroy. */
typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_client* client;
} ttpu_pjrt_abi_client_args;

/* Client_PlatformName and Client_PlatformVersion share this layout. */
typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_client* client;
  const char* str; /* out, borrowed from the client, not NUL-terminated */
  size_t str_size; /* out */
} ttpu_pjrt_abi_client_string_args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_client* client;
  ttpu_pjrt_abi_device* const* devices; /* out, borrowed from the client */
  size_t num_devices;                   /* out */
} ttpu_pjrt_abi_client_devices_args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  char* code;
  size_t code_size;
  const char* format;
  size_t format_size;
} ttpu_pjrt_abi_program;

typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_client* client;
  const ttpu_pjrt_abi_program* program;
  const char* compile_options;
  size_t compile_options_size;
  ttpu_pjrt_abi_loaded_executable* executable; /* out */
} ttpu_pjrt_abi_compile_args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_client* client;
  const void* data;
  ttpu_pjrt_abi_type type;
  const int64_t* dims;
  size_t num_dims;
  const int64_t* byte_strides;
  size_t num_byte_strides;
  int host_buffer_semantics;
  ttpu_pjrt_abi_device* device;
  void* memory;
  void* device_layout;
  ttpu_pjrt_abi_event* done_with_host_buffer; /* out */
  ttpu_pjrt_abi_buffer* buffer;               /* out */
} ttpu_pjrt_abi_buffer_from_host_args;

/* Executable_Destroy. */
typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_executable* executable;
} ttpu_pjrt_abi_executable_args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_executable* executable;
  size_t num_outputs; /* out */
} ttpu_pjrt_abi_num_outputs_args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  const ttpu_pjrt_abi_executable* executable;
  const char* serialized_bytes;                /* out, owned by the next */
  size_t serialized_bytes_size;                /* out */
  ttpu_pjrt_abi_serialized* serialized_executable; /* out */
  void (*serialized_executable_deleter)(ttpu_pjrt_abi_serialized*); /* out */
} ttpu_pjrt_abi_serialize_args;

/* LoadedExecutable_Destroy. */
typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_loaded_executable* executable;
} ttpu_pjrt_abi_loaded_executable_args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_loaded_executable* loaded_executable;
  ttpu_pjrt_abi_executable* executable; /* out, caller destroys */
} ttpu_pjrt_abi_get_executable_args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  void** send_callbacks;
  void** recv_callbacks;
  size_t num_send_ops;
  size_t num_recv_ops;
  int launch_id;
  const int64_t* non_donatable_input_indices;
  size_t num_non_donatable_input_indices;
  void* context;
  const char* call_location;
  size_t num_tasks;
  int* task_ids;
  int64_t* incarnation_ids;
} ttpu_pjrt_abi_execute_options;

typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_loaded_executable* executable;
  ttpu_pjrt_abi_execute_options* options;
  ttpu_pjrt_abi_buffer* const* const* argument_lists; /* [device][arg] */
  size_t num_devices;
  size_t num_args;
  ttpu_pjrt_abi_buffer** const* output_lists; /* [device][output], filled */
  ttpu_pjrt_abi_event** device_complete_events; /* [device] or NULL */
  ttpu_pjrt_abi_device* execute_device; /* non-NULL: portable execution */
} ttpu_pjrt_abi_execute_args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_client* client;
  const char* serialized_executable;
  size_t serialized_executable_size;
  ttpu_pjrt_abi_loaded_executable* loaded_executable; /* out */
  const char* overridden_serialized_compile_options;
  size_t overridden_serialized_compile_options_size;
} ttpu_pjrt_abi_deserialize_args;

/* Buffer_Destroy. */
typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_buffer* buffer;
} ttpu_pjrt_abi_buffer_args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_buffer* buffer;
  ttpu_pjrt_abi_type type; /* out */
} ttpu_pjrt_abi_element_type_args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_buffer* buffer;
  const int64_t* dims; /* out, borrowed from the buffer */
  size_t num_dims;     /* out */
} ttpu_pjrt_abi_dimensions_args;

/* Buffer_Device. */
typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_buffer* buffer;
  ttpu_pjrt_abi_device* device; /* out */
} ttpu_pjrt_abi_buffer_device_args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_buffer* buffer;
  ttpu_pjrt_abi_device* dst_device;
  ttpu_pjrt_abi_buffer* dst_buffer; /* out */
} ttpu_pjrt_abi_copy_to_device_args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_buffer* src;
  void* host_layout; /* NULL: dense row-major */
  void* dst;
  size_t dst_size;
  ttpu_pjrt_abi_event* event; /* out */
} ttpu_pjrt_abi_to_host_args;

/* Buffer_ReadyEvent. */
typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_buffer* buffer;
  ttpu_pjrt_abi_event* event; /* out */
} ttpu_pjrt_abi_ready_event_args;

/* Buffer_UnsafePointer: the platform's address of the buffer's memory. */
typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_buffer* buffer;
  uintptr_t buffer_pointer; /* out */
} ttpu_pjrt_abi_unsafe_pointer_args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_executable* executable;
  int64_t generated_code_size_in_bytes; /* out, all of these */
  int64_t argument_size_in_bytes;
  int64_t output_size_in_bytes;
  int64_t alias_size_in_bytes;
  int64_t temp_size_in_bytes;
  int64_t host_generated_code_size_in_bytes;
  int64_t host_argument_size_in_bytes;
  int64_t host_output_size_in_bytes;
  int64_t host_alias_size_in_bytes;
  int64_t host_temp_size_in_bytes;
  int64_t peak_memory_in_bytes;
} ttpu_pjrt_abi_memory_stats_args;

/* ---- Ahead-of-time compilation against a topology (PJRT_Compile): a
 * plugin such as libtpu compiles for chips this host does not have. */
typedef struct ttpu_pjrt_abi_topology ttpu_pjrt_abi_topology;
typedef struct ttpu_pjrt_abi_device_description
    ttpu_pjrt_abi_device_description;

typedef struct {
  size_t struct_size;
  void* extension_start;
  const char* topology_name; /* e.g. "v5e:2x2"; not NUL-terminated */
  size_t topology_name_size;
  const ttpu_pjrt_abi_named_value* create_options;
  size_t num_options;
  ttpu_pjrt_abi_topology* topology; /* out, caller destroys */
} ttpu_pjrt_abi_topology_create_args;

/* TopologyDescription_Destroy. */
typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_topology* topology;
} ttpu_pjrt_abi_topology_args;

/* TopologyDescription_PlatformName and _PlatformVersion share this layout. */
typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_topology* topology;
  const char* str; /* out, borrowed from the topology, not NUL-terminated */
  size_t str_size; /* out */
} ttpu_pjrt_abi_topology_string_args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_topology* topology;
  ttpu_pjrt_abi_device_description* const* descriptions; /* out, borrowed */
  size_t num_descriptions;                               /* out */
} ttpu_pjrt_abi_topology_devices_args;

/* DeviceDescription_Kind: "TPU v5 lite", "cpu", ... */
typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_device_description* device_description;
  const char* kind; /* out, borrowed, not NUL-terminated */
  size_t kind_size; /* out */
} ttpu_pjrt_abi_device_kind_args;

/* Device_GetDescription: the description of a client's device. */
typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_device* device;
  ttpu_pjrt_abi_device_description* device_description; /* out, borrowed */
} ttpu_pjrt_abi_device_description_args;

/* Device_MemoryStats: the plugin allocator's figures for a device; each
 * *_is_set says whether the plugin filled the value before it. Declared
 * to the newest layout: older plugins accept a larger struct_size. */
typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_device* device;
  int64_t bytes_in_use; /* out, all of these */
  int64_t peak_bytes_in_use;
  bool peak_bytes_in_use_is_set;
  int64_t num_allocs;
  bool num_allocs_is_set;
  int64_t largest_alloc_size;
  bool largest_alloc_size_is_set;
  int64_t bytes_limit;
  bool bytes_limit_is_set;
  int64_t bytes_reserved;
  bool bytes_reserved_is_set;
  int64_t peak_bytes_reserved;
  bool peak_bytes_reserved_is_set;
  int64_t bytes_reservable_limit;
  bool bytes_reservable_limit_is_set;
  int64_t largest_free_block_bytes;
  bool largest_free_block_bytes_is_set;
  int64_t pool_bytes;
  bool pool_bytes_is_set;
  int64_t peak_pool_bytes;
  bool peak_pool_bytes_is_set;
} ttpu_pjrt_abi_device_memory_stats_args;

/* DeviceDescription_Id: the device's global id, what a device assignment
 * names (not necessarily its index among the addressable devices). */
typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_device_description* device_description;
  int id; /* out */
} ttpu_pjrt_abi_device_id_args;

/* PJRT_Compile: no client needed; the result is not loaded anywhere. */
typedef struct {
  size_t struct_size;
  void* extension_start;
  const ttpu_pjrt_abi_topology* topology;
  const ttpu_pjrt_abi_program* program;
  const char* compile_options; /* serialized CompileOptionsProto */
  size_t compile_options_size;
  ttpu_pjrt_abi_client* client; /* optional */
  ttpu_pjrt_abi_executable* executable; /* out, caller destroys */
} ttpu_pjrt_abi_topology_compile_args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_executable* executable;
  size_t num_properties;                       /* out */
  const ttpu_pjrt_abi_named_value* properties; /* out, borrowed */
} ttpu_pjrt_abi_cost_analysis_args;

#define TTPU_PJRT_SLOT(args_t, name) ttpu_pjrt_abi_error* (*name)(args_t*)

/* The plugin's function table, slot by slot in ABI order. */
typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_version pjrt_api_version;

  void (*error_destroy)(ttpu_pjrt_abi_error_destroy_args*);
  void (*error_message)(ttpu_pjrt_abi_error_message_args*);
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_error_code_args, error_get_code);

  TTPU_PJRT_SLOT(ttpu_pjrt_abi_plugin_initialize_args, plugin_initialize);
  void* plugin_attributes;

  TTPU_PJRT_SLOT(ttpu_pjrt_abi_event_args, event_destroy);
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_event_is_ready_args, event_is_ready);
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_event_args, event_error);
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_event_args, event_await);
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_event_on_ready_args, event_on_ready);

  TTPU_PJRT_SLOT(ttpu_pjrt_abi_client_create_args, client_create);
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_client_args, client_destroy);
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_client_string_args, client_platform_name);
  void* client_process_index;
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_client_string_args, client_platform_version);
  void* client_devices;
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_client_devices_args,
                 client_addressable_devices);
  void* client_lookup_device;
  void* client_lookup_addressable_device;
  void* client_addressable_memories;
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_compile_args, client_compile);
  void* client_default_device_assignment;
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_buffer_from_host_args,
                 client_buffer_from_host_buffer);

  TTPU_PJRT_SLOT(ttpu_pjrt_abi_device_id_args, device_description_id);
  void* device_description_process_index;
  void* device_description_attributes;
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_device_kind_args, device_description_kind);
  void* device_description_debug_string;
  void* device_description_to_string;

  TTPU_PJRT_SLOT(ttpu_pjrt_abi_device_description_args,
                 device_get_description);
  void* device_is_addressable;
  void* device_local_hardware_id;
  void* device_addressable_memories;
  void* device_default_memory;
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_device_memory_stats_args, device_memory_stats);

  void* memory_id;
  void* memory_kind;
  void* memory_debug_string;
  void* memory_to_string;
  void* memory_addressable_by_devices;

  TTPU_PJRT_SLOT(ttpu_pjrt_abi_executable_args, executable_destroy);
  void* executable_name;
  void* executable_num_replicas;
  void* executable_num_partitions;
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_num_outputs_args, executable_num_outputs);
  void* executable_size_of_generated_code_in_bytes;
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_cost_analysis_args,
                 executable_get_cost_analysis);
  void* executable_output_memory_kinds;
  void* executable_optimized_program;
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_serialize_args, executable_serialize);

  TTPU_PJRT_SLOT(ttpu_pjrt_abi_loaded_executable_args,
                 loaded_executable_destroy);
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_get_executable_args,
                 loaded_executable_get_executable);
  void* loaded_executable_addressable_devices;
  void* loaded_executable_delete;
  void* loaded_executable_is_deleted;
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_execute_args, loaded_executable_execute);
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_deserialize_args,
                 executable_deserialize_and_load);
  void* loaded_executable_fingerprint;

  TTPU_PJRT_SLOT(ttpu_pjrt_abi_buffer_args, buffer_destroy);
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_element_type_args, buffer_element_type);
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_dimensions_args, buffer_dimensions);
  void* buffer_unpadded_dimensions;
  void* buffer_dynamic_dimension_indices;
  void* buffer_get_memory_layout;
  void* buffer_on_device_size_in_bytes;
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_buffer_device_args, buffer_device);
  void* buffer_memory;
  void* buffer_delete;
  void* buffer_is_deleted;
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_copy_to_device_args, buffer_copy_to_device);
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_to_host_args, buffer_to_host_buffer);
  void* buffer_is_on_cpu;
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_ready_event_args, buffer_ready_event);
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_unsafe_pointer_args, buffer_unsafe_pointer);
  void* buffer_increase_external_reference_count;
  void* buffer_decrease_external_reference_count;
  void* buffer_opaque_device_memory_data_pointer;

  void* copy_to_device_stream_destroy;
  void* copy_to_device_stream_add_chunk;
  void* copy_to_device_stream_total_bytes;
  void* copy_to_device_stream_granule_size;
  void* copy_to_device_stream_current_bytes;

  TTPU_PJRT_SLOT(ttpu_pjrt_abi_topology_create_args,
                 topology_description_create);
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_topology_args, topology_description_destroy);
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_topology_string_args,
                 topology_description_platform_name);
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_topology_string_args,
                 topology_description_platform_version);
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_topology_devices_args,
                 topology_description_get_device_descriptions);
  void* topology_description_serialize;
  void* topology_description_attributes;

  /* Ahead-of-time compile against a topology. */
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_topology_compile_args, compile);

  void* executable_output_element_types;
  void* executable_output_dimensions;
  void* buffer_copy_to_memory;
  void* client_create_view_of_device_buffer;
  void* executable_fingerprint;
  void* client_topology_description;
  TTPU_PJRT_SLOT(ttpu_pjrt_abi_memory_stats_args,
                 executable_get_compiled_memory_stats);
  /* Later slots exist in newer plugins; we do not use them. */
} ttpu_pjrt_abi_api;

/* True when the plugin's table is long enough to hold `slot` and fills it. */
#define TTPU_PJRT_HAS(api, slot)                                   \
  ((api)->struct_size >= TTPU_PJRT_STRUCT_SIZE(ttpu_pjrt_abi_api, slot) && \
   (api)->slot != NULL)

typedef const ttpu_pjrt_abi_api* (*ttpu_pjrt_abi_get_api_fn)(void);

#endif /* TTPU_PJRT_ABI_H_ */
