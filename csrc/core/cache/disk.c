/* disk.c - the persistent compile cache: serialized executables on disk,
 * shared by every process (and every mode, and torch.compile) that runs
 * the same engine build on the same plugin.
 *
 * Layout: <dir>/<namespace>/<key hash>.prog. The namespace hashes what
 * makes an executable valid: this engine's build (its ELF build id: a
 * rebuilt engine may lower the same signature differently), the plugin's
 * platform name and version and PJRT API version, our compile options, and
 * on the CPU platform the host CPU (XLA compiles for the host's features).
 * Entries of other namespaces are never read, only evicted.
 *
 * A file holds: magic, namespace, the full signature key (a hash match is
 * not trusted), the result plans, the executable, and a checksum of all of
 * it. Writers write a private temporary file and rename it into place, so
 * a reader sees a whole file or none; a file that fails any check is
 * deleted and the program recompiled. The directory is kept under a size
 * cap by deleting the least recently used files (a hit touches its file's
 * modification time).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "disk.h"

#define MAGIC "TTPUPRG1"
#define DEFAULT_MAX_MB 2048

struct ttpu_disk {
  char* dir;      /* <root>/<namespace> */
  char* root;
  uint64_t ns;
  int64_t max_bytes;
  int64_t approx_bytes; /* -1 until the root was scanned */
  unsigned counter;
  char error[512];      /* why the last store failed for good */
};

/* ------------------------------------------------------------ hashing */

static uint64_t fnv(uint64_t h, const void* p, size_t n) {
  const unsigned char* c = p;
  for (size_t i = 0; i < n; ++i) {
    h ^= c[i];
    h *= 1099511628211ull;
  }
  return h;
}
#define FNV0 1469598103934665603ull

static uint64_t fnv_str(uint64_t h, const char* s) {
  return fnv(h, s ? s : "", s ? strlen(s) + 1 : 1);
}

/* This engine's identity: the build id note of the object it is linked
 * into, or failing that a hash of that file's bytes. */
typedef struct {
  uintptr_t addr;
  uint64_t h;
  int found;
} build_id_ctx;

static int find_build_id(struct dl_phdr_info* info, size_t size, void* arg) {
  (void)size;
  build_id_ctx* c = arg;
  int mine = 0;
  for (int i = 0; i < info->dlpi_phnum && !mine; ++i) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    mine = ph->p_type == PT_LOAD && c->addr >= lo && c->addr < lo + ph->p_memsz;
  }
  if (!mine) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE) continue;
    const char* p = (const char*)(info->dlpi_addr + ph->p_vaddr);
    const char* end = p + ph->p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const ElfW(Nhdr)* nh = (const ElfW(Nhdr)*)p;
      const char* name = p + sizeof(*nh);
      const char* desc = name + ((nh->n_namesz + 3) & ~3u);
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
          !memcmp(name, "GNU", 4) && desc + nh->n_descsz <= end) {
        c->h = fnv(FNV0, desc, nh->n_descsz);
        c->found = 1;
        return 1;
      }
      p = desc + ((nh->n_descsz + 3) & ~3u);
    }
  }
  /* No build id: hash the object's file. */
  const char* path = info->dlpi_name && *info->dlpi_name ? info->dlpi_name
                                                          : "/proc/self/exe";
  FILE* f = fopen(path, "rb");
  if (f) {
    char buf[65536];
    size_t n;
    uint64_t h = FNV0;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) h = fnv(h, buf, n);
    fclose(f);
    c->h = h;
    c->found = 1;
  }
  return 1;
}

static uint64_t engine_build_id(void) {
  build_id_ctx c = {(uintptr_t)&engine_build_id, 0, 0};
  dl_iterate_phdr(find_build_id, &c);
  /* Unknowable build: a per-process namespace, so nothing stale is read. */
  return c.found ? c.h : fnv(FNV0, &c.addr, sizeof(c.addr)) ^ (uint64_t)getpid();
}

static uint64_t host_cpu_id(void) {
  FILE* f = fopen("/proc/cpuinfo", "r");
  if (!f) return 0;
  char line[8192];
  uint64_t h = FNV0;
  int got = 0;
  while (fgets(line, sizeof(line), f) && got < 3) {
    if (!strncmp(line, "model name", 10) || !strncmp(line, "flags", 5) ||
        !strncmp(line, "vendor_id", 9)) {
      h = fnv_str(h, line);
      got++;
    }
  }
  fclose(f);
  return h;
}

/* ------------------------------------------------------------ files */

static int mkdirs(const char* path) {
  char tmp[4096];
  if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp)) return -1;
  for (char* p = tmp + 1; *p; ++p) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(tmp, 0755) && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(tmp, 0755) && errno != EEXIST) return -1;
  return 0;
}

static void entry_path(const ttpu_disk* d, const int64_t* key, size_t n,
                       char* out, size_t cap) {
  uint64_t h1 = fnv(FNV0, key, n * sizeof(*key));
  uint64_t h2 = fnv(0x84222325cbf29ce4ull ^ n, key, n * sizeof(*key));
  snprintf(out, cap, "%s/%016llx%016llx.prog", d->dir, (unsigned long long)h1,
           (unsigned long long)h2);
}

typedef struct {
  char* p;
  size_t n, cap;
} wbuf;

static int put(wbuf* b, const void* p, size_t n) {
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + n) cap *= 2;
    char* q = realloc(b->p, cap);
    if (!q) return -1;
    b->p = q;
    b->cap = cap;
  }
  memcpy(b->p + b->n, p, n);
  b->n += n;
  return 0;
}

/* ------------------------------------------------------------ eviction */

typedef struct {
  char* path;
  time_t mtime;
  int64_t size;
} file_info;

static int by_mtime(const void* a, const void* b) {
  const file_info* x = a;
  const file_info* y = b;
  return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

/* Every file under root (one level of namespace directories). */
static int64_t scan(const char* root, file_info** out, int* n_out) {
  int64_t total = 0;
  int n = 0, cap = 0;
  file_info* v = NULL;
  DIR* top = opendir(root);
  if (!top) goto done;
  struct dirent* ns;
  while ((ns = readdir(top))) {
    if (ns->d_name[0] == '.') continue;
    char sub[4096];
    snprintf(sub, sizeof(sub), "%s/%s", root, ns->d_name);
    DIR* dd = opendir(sub);
    if (!dd) continue;
    struct dirent* f;
    while ((f = readdir(dd))) {
      if (!strcmp(f->d_name, ".") || !strcmp(f->d_name, "..")) continue;
      char path[4096 + 256];
      snprintf(path, sizeof(path), "%s/%s", sub, f->d_name);
      struct stat st;
      if (stat(path, &st) || !S_ISREG(st.st_mode)) continue;
      total += st.st_size;
      if (!out) continue;
      if (n == cap) {
        int c2 = cap ? cap * 2 : 256;
        file_info* v2 = realloc(v, (size_t)c2 * sizeof(*v2));
        if (!v2) continue;
        v = v2;
        cap = c2;
      }
      v[n].path = strdup(path);
      v[n].mtime = st.st_mtime;
      v[n].size = st.st_size;
      if (v[n].path) n++;
    }
    closedir(dd);
  }
  closedir(top);
done:
  if (out) {
    *out = v;
    *n_out = n;
  }
  return total;
}

static void evict(ttpu_disk* d) {
  file_info* v = NULL;
  int n = 0;
  int64_t total = scan(d->root, &v, &n);
  qsort(v, (size_t)n, sizeof(*v), by_mtime);
  int64_t target = d->max_bytes - d->max_bytes / 5;
  for (int i = 0; i < n && total > target; ++i)
    if (!unlink(v[i].path)) total -= v[i].size;
  for (int i = 0; i < n; ++i) free(v[i].path);
  free(v);
  d->approx_bytes = total;
}

/* ------------------------------------------------------------ API */

void ttpu_disk_close(ttpu_disk* d) {
  if (!d) return;
  free(d->dir);
  free(d->root);
  free(d);
}

void ttpu_disk_namespace_make(const char* platform_name,
                              const char* platform_version, int api_major,
                              int api_minor, const char* options_id,
                              int host_code, ttpu_disk_namespace* out) {
  memset(out, 0, sizeof(*out));
  out->platform_name = platform_name;
  out->platform_version = platform_version;
  out->api_major = api_major;
  out->api_minor = api_minor;
  out->options_id = options_id;
  out->host_cpu = host_code != 0;
}

uint64_t ttpu_disk_namespace_id(const ttpu_disk_namespace* nsp) {
  int major = nsp->api_major, minor = nsp->api_minor;
  uint64_t ns = fnv_str(FNV0, MAGIC);
  uint64_t bid = engine_build_id();
  ns = fnv(ns, &bid, sizeof(bid));
  ns = fnv_str(ns, nsp->platform_name);
  ns = fnv_str(ns, nsp->platform_version);
  ns = fnv(ns, &major, sizeof(major));
  ns = fnv(ns, &minor, sizeof(minor));
  ns = fnv_str(ns, nsp->options_id);
  if (nsp->host_cpu) {
    uint64_t cpu = host_cpu_id();
    ns = fnv(ns, &cpu, sizeof(cpu));
  }
  return ns;
}

ttpu_status* ttpu_disk_open(const ttpu_disk_namespace* nsp, const char* root,
                           int64_t max_bytes, ttpu_disk** out) {
  *out = NULL;
  uint64_t ns = ttpu_disk_namespace_id(nsp);
  ttpu_disk* d = calloc(1, sizeof(*d));
  if (!d) return ttpu_status_oom();
  d->root = strdup(root);
  size_t len = strlen(root) + 32;
  d->dir = malloc(len);
  if (!d->root || !d->dir) {
    ttpu_disk_close(d);
    return ttpu_status_oom();
  }
  snprintf(d->dir, len, "%s/%016llx", root, (unsigned long long)ns);
  d->ns = ns;
  d->max_bytes = max_bytes > 0 ? max_bytes : (int64_t)DEFAULT_MAX_MB << 20;
  d->approx_bytes = -1;
  if (mkdirs(d->dir)) {
    ttpu_status* s = ttpu_status_make(TTPU_FAILED_PRECONDITION,
                                      "compile cache directory %s: %s", d->dir,
                                      strerror(errno));
    ttpu_disk_close(d);
    return s;
  }
  *out = d;
  return NULL;
}

const char* ttpu_disk_root(const ttpu_disk* d) { return d->root; }

void ttpu_disk_record_free(ttpu_disk_record* r) {
  if (!r) return;
  free(r->key);
  free(r->results);
  free(r->exe);
  memset(r, 0, sizeof(*r));
}

/* Parses a whole file's bytes; any inconsistency is a corrupt (or foreign)
 * entry. */
static int parse_entry(const char* data, size_t size, ttpu_disk_record* out) {
  memset(out, 0, sizeof(*out));
  int ok = data != NULL && size >= 8;
  const char* p = data;
  const char* end = data + size;
  uint64_t ns = 0, nk = 0, exe_len = 0, sum = 0;
  uint32_t nr = 0;
#define TAKE(dst, len)                            \
  do {                                            \
    if (!ok || (size_t)(end - p) < (size_t)(len)) \
      ok = 0;                                     \
    else {                                        \
      memcpy((dst), p, (len));                    \
      p += (len);                                 \
    }                                             \
  } while (0)
  char magic[8];
  TAKE(magic, 8);
  ok = ok && !memcmp(magic, MAGIC, 8);
  TAKE(&ns, 8);
  TAKE(&nk, 8);
  ok = ok && nk < ((uint64_t)1 << 24) &&
       (size_t)(end - p) >= (size_t)nk * sizeof(int64_t);
  const char* key = p;
  if (ok) p += (size_t)nk * sizeof(int64_t);
  TAKE(&nr, 4);
  uint32_t pad;
  TAKE(&pad, 4);
  ok = ok && nr < 1000000 &&
       (size_t)(end - p) >= (size_t)nr * sizeof(ttpu_result_plan);
  const char* results = p;
  if (ok) p += (size_t)nr * sizeof(ttpu_result_plan);
  TAKE(&exe_len, 8);
  ok = ok && exe_len > 0 && (size_t)(end - p) == exe_len + 8;
  const char* exe = p;
  if (ok) {
    memcpy(&sum, p + exe_len, 8);
    ok = sum == fnv(FNV0, data, size - 8);
  }
#undef TAKE
  if (!ok) return 0;
  out->ns = ns;
  out->n_key = (size_t)nk;
  out->n_results = (int)nr;
  out->exe_len = (size_t)exe_len;
  out->key = malloc((size_t)nk * sizeof(int64_t) + 1);
  out->results = malloc((size_t)nr * sizeof(ttpu_result_plan) + 1);
  out->exe = malloc((size_t)exe_len);
  if (!out->key || !out->results || !out->exe) {
    ttpu_disk_record_free(out);
    return 0;
  }
  memcpy(out->key, key, (size_t)nk * sizeof(int64_t));
  memcpy(out->results, results, (size_t)nr * sizeof(ttpu_result_plan));
  memcpy(out->exe, exe, (size_t)exe_len);
  return 1;
}

int ttpu_disk_read_file(const char* path, ttpu_disk_record* out) {
  memset(out, 0, sizeof(*out));
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  struct stat st;
  char* data = NULL;
  int ok = 0;
  size_t size = 0;
  if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_size > 0 &&
      st.st_size < ((int64_t)1 << 34)) {
    size = (size_t)st.st_size;
    data = malloc(size);
    size_t got = 0;
    while (data && got < size) {
      ssize_t r = read(fd, data + got, size - got);
      if (r <= 0) break;
      got += (size_t)r;
    }
    ok = data && got == size;
  }
  close(fd);
  ok = ok && parse_entry(data, size, out);
  free(data);
  return ok;
}

/* Reads key's entry of d's namespace: 1 valid (*r filled), 0 none, -1 a
 * file that is there but corrupt, stale or foreign. */
static int read_entry(const ttpu_disk* d, const int64_t* key, size_t n,
                      char* path, size_t cap, ttpu_disk_record* r) {
  entry_path(d, key, n, path, cap);
  if (access(path, F_OK)) return 0;
  if (!ttpu_disk_read_file(path, r)) return -1;
  if (r->ns != d->ns || r->n_key != n ||
      memcmp(r->key, key, n * sizeof(int64_t))) {
    ttpu_disk_record_free(r);
    return -1;
  }
  return 1;
}

int ttpu_disk_contains(ttpu_disk* d, const int64_t* key, size_t n) {
  char path[4200];
  ttpu_disk_record r;
  int got = read_entry(d, key, n, path, sizeof(path), &r);
  if (got > 0) ttpu_disk_record_free(&r);
  return got > 0;
}

int ttpu_disk_load(ttpu_disk* d, ttpu_pjrt_client* c, const int64_t* key,
                   size_t n, ttpu_cache_entry* out) {
  char path[4200];
  ttpu_disk_record r;
  int got = read_entry(d, key, n, path, sizeof(path), &r);
  if (got == 0) return 0;
  int ok = got > 0;
  if (ok) {
    ttpu_status* s = ttpu_pjrt_exec_deserialize(c, r.exe, r.exe_len, &out->exec);
    if (s) {
      ttpu_status_free(s);
      ok = 0;
    }
  }
  if (!ok) {
    ttpu_disk_record_free(&r);
    unlink(path); /* corrupt or stale: rebuilt by the caller */
    return 0;
  }
  out->results = r.results; /* the entry keeps the record's result plans */
  out->n_results = r.n_results;
  out->hits = 0;
  r.results = NULL;
  ttpu_disk_record_free(&r);
  utimensat(AT_FDCWD, path, NULL, 0); /* most recently used */
  return 1;
}

int ttpu_disk_store(ttpu_disk* d, ttpu_pjrt_client* c, const int64_t* key,
                    size_t n, const ttpu_cache_entry* e) {
  void* exe = NULL;
  size_t exe_len = 0;
  ttpu_status* s = ttpu_pjrt_exec_serialize(c, e->exec, &exe, &exe_len);
  if (s) {
    ttpu_status_free(s);
    return 0;
  }
  int rc = ttpu_disk_store_serialized(d, key, n, e->results, e->n_results,
                                      exe, exe_len);
  free(exe);
  return rc;
}

int ttpu_disk_store_serialized(ttpu_disk* d, const int64_t* key, size_t n,
                               const ttpu_result_plan* results, int n_results,
                               const void* exe, size_t exe_len) {
  if (!exe || exe_len == 0 || n_results < 0) return 0;
  wbuf b = {0};
  uint64_t nk = n, el = exe_len;
  uint32_t nr = (uint32_t)n_results, pad = 0;
  int rc = put(&b, MAGIC, 8);
  rc |= put(&b, &d->ns, 8);
  rc |= put(&b, &nk, 8);
  rc |= put(&b, key, n * sizeof(int64_t));
  rc |= put(&b, &nr, 4);
  rc |= put(&b, &pad, 4);
  if (nr) rc |= put(&b, results, (size_t)nr * sizeof(ttpu_result_plan));
  rc |= put(&b, &el, 8);
  rc |= put(&b, exe, exe_len);
  uint64_t sum = rc ? 0 : fnv(FNV0, b.p, b.n);
  rc |= put(&b, &sum, 8);
  int written = 0, err = 0;
  if (!rc) {
    char path[4200], tmp[4300];
    entry_path(d, key, n, path, sizeof(path));
    snprintf(tmp, sizeof(tmp), "%s/.tmp-%ld-%u-%lld", d->dir, (long)getpid(),
             d->counter++, (long long)time(NULL));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) {
      size_t off = 0;
      while (off < b.n) {
        ssize_t w = write(fd, b.p + off, b.n - off);
        if (w <= 0) {
          err = w < 0 ? errno : ENOSPC;
          break;
        }
        off += (size_t)w;
      }
      int closed = close(fd);
      if (closed && !err) err = errno;
      /* rename is atomic: readers see the old file, the new one, or none */
      if (off == b.n && !closed && !rename(tmp, path)) written = 1;
      else if (!err) err = errno;
      if (!written) unlink(tmp);
    } else if (errno == ENOENT) {
      mkdirs(d->dir); /* removed under us: next store recreates it */
    } else {
      err = errno;
    }
  }
  if (written) {
    if (d->approx_bytes < 0) d->approx_bytes = scan(d->root, NULL, NULL);
    else d->approx_bytes += (int64_t)b.n;
    if (d->approx_bytes > d->max_bytes) evict(d);
  }
  free(b.p);
  if (written) return 1;
  /* A full or read-only file system fails every later store the same way:
   * the caller turns the cache off rather than pay for it each compile. */
  if (err == ENOSPC || err == EDQUOT || err == EFBIG || err == EROFS ||
      err == EACCES || err == EPERM) {
    snprintf(d->error, sizeof(d->error), "%s: %s", d->dir, strerror(err));
    return -1;
  }
  return 0;
}

const char* ttpu_disk_error(const ttpu_disk* d) { return d->error; }
