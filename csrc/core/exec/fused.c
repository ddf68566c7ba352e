/* fused.c - fused mode's executor: every op is recorded into the window
 * (exec/window.h), which runs as one program at a boundary. */
#include "executor.h"
#include "window.h"

const ttpu_executor_ops ttpu_executor_fused = {
    .name = "fused",
    .submit = ttpu_window_record,
    .flush = ttpu_window_flush,
    .touch = ttpu_window_touch,
    .host_read = ttpu_window_host_read,
};
