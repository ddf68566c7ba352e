/* disk.h - the persistent compile cache (internal; cache/disk.c). It never
 * sees the runtime: its caller names the namespace (what makes a cached
 * executable valid) and passes the client to (de)serialize with.
 * Not thread-safe: the caller serializes every call on one ttpu_disk (the
 * runtime holds its lock); processes share the directory safely. */
#ifndef TTPU_CACHE_DISK_H_
#define TTPU_CACHE_DISK_H_

#include "cache.h"

typedef struct ttpu_disk ttpu_disk;

/* What an executable's validity depends on besides this engine's build:
 * strings borrowed for the call. */
typedef struct {
  const char* platform_name;
  const char* platform_version;
  int api_major, api_minor;   /* the plugin's PJRT API version */
  const char* options_id;     /* identity of the compile options used */
  int host_cpu;               /* executables are host code: mix in the
                                 host CPU's identity */
} ttpu_disk_namespace;

/* Opens (creating) the cache under root for namespace ns, at most
 * max_bytes (<= 0: the default, 2 GiB). *out owned by the caller
 * (ttpu_disk_close). */
ttpu_status* ttpu_disk_open(const ttpu_disk_namespace* ns, const char* root,
                            int64_t max_bytes, ttpu_disk** out);
void ttpu_disk_close(ttpu_disk* d);
/* The root directory it was opened with, borrowed. */
const char* ttpu_disk_root(const ttpu_disk* d);
/* load returns 1 and fills *out (exec, results) on a valid entry; store
 * returns 1 when the entry was written, 0 when not (this time), -1 when the
 * directory cannot take entries at all. */
int ttpu_disk_load(ttpu_disk* d, ttpu_pjrt_client* c, const int64_t* key,
                   size_t n, ttpu_cache_entry* out);
int ttpu_disk_store(ttpu_disk* d, ttpu_pjrt_client* c, const int64_t* key,
                    size_t n, const ttpu_cache_entry* e);
/* After store returned -1 (the directory cannot take files: full,
 * read-only, no permission): what failed, borrowed. */
const char* ttpu_disk_error(const ttpu_disk* d);

#endif /* TTPU_CACHE_DISK_H_ */
