/* execute.c - running an executable on one device. */
#include <stdlib.h>
#include <string.h>

#include "pjrt_internal.h"

ttpu_status* ttpu_pjrt_execute(ttpu_pjrt_client* c, ttpu_pjrt_exec* e,
                               int device, ttpu_pjrt_buffer* const* args,
                               int n_args, ttpu_pjrt_buffer** outs, int n_outs,
                               ttpu_pjrt_event** done) {
  if (done) *done = NULL;
  if (!c || !e)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "NULL client or exec");
  if (n_outs < 0 || (n_outs > 0 && !outs))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "bad outputs array");
  for (int i = 0; i < n_outs; i++) outs[i] = NULL;
  /* The plugin writes exactly num_outputs entries; a shorter array would
   * be overrun, so a mismatch is refused here. */
  if (n_outs != e->num_outputs)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "execute: program has %d outputs, caller "
                            "provided room for %d",
                            e->num_outputs, n_outs);
  if (n_args < 0 || (n_args > 0 && !args))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "bad arguments array");
  for (int i = 0; i < n_args; i++)
    if (!args[i])
      return ttpu_status_make(TTPU_INVALID_ARGUMENT, "argument %d is NULL",
                              i);
  ttpu_pjrt_abi_device* dev;
  ttpu_status* s = ttpu_pjrt_client_device(c, device, &dev);
  if (s) return s;

  /* Donation is decided by the program (tf.aliasing_output on a
   * parameter) and consumes the argument. One exception: the plugin
   * refuses a call that donates a buffer also passed as another argument
   * (x.add_(x)). Every argument whose buffer appears more than once is
   * therefore marked non-donatable for this call; XLA then copies instead
   * of aliasing, and marking a parameter that is not donated is a no-op.
   * Pinned buffers are marked the same way. */
  ttpu_pjrt_abi_execute_options opts;
  TTPU_PJRT_INIT_ARGS(opts, ttpu_pjrt_abi_execute_options, incarnation_ids);
  int64_t keep_small[16];
  int64_t* keep = keep_small;
  size_t n_keep = 0;
  for (int i = 0; i < n_args; i++) {
    int dup = 0;
    for (int j = 0; j < n_args && !dup; j++) dup = j != i && args[j] == args[i];
    /* A pinned buffer's memory is the host's to work on (buffer.c). */
    if (!dup && c->n_pinned) dup = ttpu_pjrt_buffer_pinned(c, args[i]);
    if (!dup) continue;
    if (keep == keep_small && n_keep == 16) {
      keep = malloc((size_t)n_args * sizeof(*keep));
      if (!keep)
        return ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of memory");
      memcpy(keep, keep_small, sizeof(keep_small));
    }
    keep[n_keep++] = i;
  }
  if (n_keep) {
    opts.non_donatable_input_indices = keep;
    opts.num_non_donatable_input_indices = n_keep;
  }

  /* One device: argument/output lists of length 1. The plugin fills the
   * raw output pointers straight into `outs` (same representation). */
  ttpu_pjrt_abi_buffer* const* arg_list = (ttpu_pjrt_abi_buffer* const*)args;
  static ttpu_pjrt_abi_buffer* const kNoArgs[1] = {NULL};
  if (n_args == 0) arg_list = kNoArgs;
  ttpu_pjrt_abi_buffer* no_outs[1] = {NULL};
  ttpu_pjrt_abi_buffer** out_list =
      n_outs ? (ttpu_pjrt_abi_buffer**)outs : no_outs;
  ttpu_pjrt_abi_event* event = NULL;

  ttpu_pjrt_abi_execute_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_execute_args, execute_device);
  a.executable = e->loaded;
  a.options = &opts;
  a.argument_lists = &arg_list;
  a.num_devices = 1;
  a.num_args = (size_t)n_args;
  a.output_lists = &out_list;
  a.device_complete_events = done ? &event : NULL;
  /* Portable execution (see compile.c): the device is chosen per call. */
  a.execute_device = dev;
  s = TTPU_PJRT_CALL(c->api, loaded_executable_execute, a);
  if (keep != keep_small) free(keep);
  if (s) {
    for (int i = 0; i < n_outs; i++) outs[i] = NULL;
    return s;
  }
  if (done) *done = (ttpu_pjrt_event*)event;
  return NULL;
}

ttpu_status* ttpu_pjrt_execute_replicated(ttpu_pjrt_client* c,
                                          ttpu_pjrt_exec* e, int n_devices,
                                          ttpu_pjrt_buffer* const* args,
                                          int n_args, ttpu_pjrt_buffer** outs,
                                          int n_outs, ttpu_pjrt_event** done) {
  if (!c || !e)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "NULL client or exec");
  if (n_devices <= 0 || n_args < 0 || n_outs < 0 ||
      (n_args > 0 && !args) || (n_outs > 0 && !outs))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "bad replicated argument or output arrays");
  if (n_outs != e->num_outputs)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "execute: program has %d outputs, caller "
                            "provided room for %d",
                            e->num_outputs, n_outs);
  for (int i = 0; i < n_devices * n_outs; i++) outs[i] = NULL;
  for (int i = 0; i < n_devices * n_args; i++)
    if (!args[i])
      return ttpu_status_make(TTPU_INVALID_ARGUMENT, "argument %d of replica "
                              "%d is NULL", i % n_args, i / n_args);
  if (done)
    for (int d = 0; d < n_devices; d++) done[d] = NULL;
  /* The plugin reads one pointer per replica to that replica's argument
   * and output arrays; ours are slices of the caller's flat arrays. */
  ttpu_pjrt_abi_buffer* const** arg_lists =
      calloc((size_t)n_devices, sizeof(*arg_lists));
  ttpu_pjrt_abi_buffer*** out_lists =
      calloc((size_t)n_devices, sizeof(*out_lists));
  ttpu_pjrt_abi_buffer** no_outs =
      calloc((size_t)n_devices, sizeof(*no_outs));
  static ttpu_pjrt_abi_buffer* const kNoArgs[1] = {NULL};
  if (!arg_lists || !out_lists || !no_outs) {
    free(arg_lists);
    free(out_lists);
    free(no_outs);
    return ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of memory");
  }
  for (int d = 0; d < n_devices; d++) {
    arg_lists[d] = n_args ? (ttpu_pjrt_abi_buffer* const*)(args + (size_t)d * n_args)
                          : kNoArgs;
    out_lists[d] = n_outs ? (ttpu_pjrt_abi_buffer**)(outs + (size_t)d * n_outs)
                          : &no_outs[d];
  }
  ttpu_pjrt_abi_execute_options opts;
  TTPU_PJRT_INIT_ARGS(opts, ttpu_pjrt_abi_execute_options, incarnation_ids);
  /* A parameter is not donated where any replica passes a pinned buffer. */
  int64_t* keep = NULL;
  size_t n_keep = 0;
  if (c->n_pinned && n_args) {
    keep = malloc((size_t)n_args * sizeof(*keep));
    if (!keep) {
      free(arg_lists);
      free(out_lists);
      free(no_outs);
      return ttpu_status_oom();
    }
    for (int i = 0; i < n_args; i++) {
      int pinned = 0;
      for (int d = 0; d < n_devices && !pinned; d++)
        pinned = ttpu_pjrt_buffer_pinned(c, args[(size_t)d * n_args + i]);
      if (pinned) keep[n_keep++] = i;
    }
    opts.non_donatable_input_indices = keep;
    opts.num_non_donatable_input_indices = n_keep;
  }
  ttpu_pjrt_abi_execute_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_execute_args, execute_device);
  a.executable = e->loaded;
  a.options = &opts;
  a.argument_lists = (ttpu_pjrt_abi_buffer* const* const*)arg_lists;
  a.num_devices = (size_t)n_devices;
  a.num_args = (size_t)n_args;
  a.output_lists = (ttpu_pjrt_abi_buffer** const*)out_lists;
  a.device_complete_events = done ? (ttpu_pjrt_abi_event**)done : NULL;
  a.execute_device = NULL; /* every replica, on its assigned device */
  ttpu_status* s = TTPU_PJRT_CALL(c->api, loaded_executable_execute, a);
  free(keep);
  free(arg_lists);
  free(out_lists);
  free(no_outs);
  if (s)
    for (int i = 0; i < n_devices * n_outs; i++) outs[i] = NULL;
  return s;
}
