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

/* The namespace of the executables a plugin compiles: the one place it is
 * made, both for a runtime (from its client) and for a cache written ahead
 * of time for another platform (from libtpu and a topology). Strings are
 * borrowed into *out; they must outlive its use. */
void ttpu_disk_namespace_make(const char* platform_name,
                              const char* platform_version, int api_major,
                              int api_minor, const char* options_id,
                              int host_code, ttpu_disk_namespace* out);
/* The namespace's identity (this engine's build included): entries live in
 * <root>/<16 hex digits of it>. */
uint64_t ttpu_disk_namespace_id(const ttpu_disk_namespace* ns);

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
/* Whether a whole, valid entry for key is on disk (checked like load,
 * without deserializing the executable): 1 yes, 0 no. */
int ttpu_disk_contains(ttpu_disk* d, const int64_t* key, size_t n);
/* store, for an executable serialized elsewhere (by another plugin: the
 * ahead-of-time writer); exe borrowed. Same return values as store. */
int ttpu_disk_store_serialized(ttpu_disk* d, const int64_t* key, size_t n,
                               const ttpu_result_plan* results, int n_results,
                               const void* exe, size_t exe_len);

/* One entry file, parsed and checked (magic, checksum, lengths) but not
 * deserialized. Every pointer is malloc'ed, freed by
 * ttpu_disk_record_free. */
typedef struct {
  uint64_t ns;             /* namespace id it was written under */
  int64_t* key;
  size_t n_key;
  ttpu_result_plan* results;
  int n_results;
  void* exe;               /* the serialized executable */
  size_t exe_len;
} ttpu_disk_record;
/* Reads the entry file at path: 1 and *out filled when it is whole and
 * valid, else 0 (nothing to free). Touches nothing on disk. */
int ttpu_disk_read_file(const char* path, ttpu_disk_record* out);
void ttpu_disk_record_free(ttpu_disk_record* r);

/* After store returned -1 (the directory cannot take files: full,
 * read-only, no permission): what failed, borrowed. */
const char* ttpu_disk_error(const ttpu_disk* d);

#endif /* TTPU_CACHE_DISK_H_ */
