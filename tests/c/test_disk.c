/* test_disk.c - the persistent compile cache's namespace, entry files and
 * the program sink a cache filler uses, on the CPU plugin. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/disk.h"
#include "pjrt/ttpu_pjrt.h"
#include "ttpu_aot.h"
#include "ttpu_test.h"

static char* make_tmpdir(void) {
  char tmpl[] = "/tmp/ttpu-disk-XXXXXX";
  char* d = mkdtemp(tmpl);
  return d ? strdup(d) : NULL;
}

static void remove_tree(const char* root) {
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
  if (system(cmd)) { /* best effort */
  }
}

static void test_namespace_id(ttpu_test_ctx* t) {
  ttpu_disk_namespace a, b;
  ttpu_disk_namespace_make("tpu", "libtpu 1", 0, 80, "opts", 0, &a);
  ttpu_disk_namespace_make("tpu", "libtpu 1", 0, 80, "opts", 0, &b);
  TTPU_CHECK(t, ttpu_disk_namespace_id(&a) == ttpu_disk_namespace_id(&b));
  uint64_t base = ttpu_disk_namespace_id(&a);
  ttpu_disk_namespace_make("cpu", "libtpu 1", 0, 80, "opts", 0, &b);
  TTPU_CHECK(t, ttpu_disk_namespace_id(&b) != base);
  ttpu_disk_namespace_make("tpu", "libtpu 2", 0, 80, "opts", 0, &b);
  TTPU_CHECK(t, ttpu_disk_namespace_id(&b) != base);
  ttpu_disk_namespace_make("tpu", "libtpu 1", 0, 81, "opts", 0, &b);
  TTPU_CHECK(t, ttpu_disk_namespace_id(&b) != base);
  ttpu_disk_namespace_make("tpu", "libtpu 1", 0, 80, "other", 0, &b);
  TTPU_CHECK(t, ttpu_disk_namespace_id(&b) != base);
  ttpu_disk_namespace_make("tpu", "libtpu 1", 0, 80, "opts", 1, &b);
  TTPU_CHECK(t, ttpu_disk_namespace_id(&b) != base);
}

/* An executable serialized elsewhere: written, found, read back whole,
 * invisible to another namespace, and a corrupt file is no entry. */
static void test_store_serialized_reads_back(ttpu_test_ctx* t) {
  char* root = make_tmpdir();
  TTPU_CHECK(t, root != NULL);
  ttpu_disk_namespace ns, other;
  ttpu_disk_namespace_make("tpu", "fake 1", 0, 80, "opts", 0, &ns);
  ttpu_disk_namespace_make("tpu", "fake 2", 0, 80, "opts", 0, &other);
  ttpu_disk *d = NULL, *d2 = NULL;
  ttpu_status* s = ttpu_disk_open(&ns, root, 0, &d);
  if (!s) s = ttpu_disk_open(&other, root, 0, &d2);
  int64_t key[3] = {7, -1, 123456789012345ll};
  ttpu_result_plan plans[2];
  memset(plans, 0, sizeof(plans));
  plans[0].check_code = TTPU_INVALID_ARGUMENT;
  snprintf(plans[1].check_fmt, sizeof(plans[1].check_fmt), "why %%d");
  const char exe[] = "not really an executable";
  int ok = !s && !ttpu_disk_contains(d, key, 3) &&
           ttpu_disk_store_serialized(d, key, 3, plans, 2, exe,
                                      sizeof(exe)) == 1 &&
           ttpu_disk_contains(d, key, 3) && !ttpu_disk_contains(d2, key, 3);
  int64_t other_key[3] = {7, -1, 5};
  ok = ok && !ttpu_disk_contains(d, other_key, 3);
  /* The one file under <root>/<namespace id> reads back as written. */
  char dir[700], path[1000] = {0};
  snprintf(dir, sizeof(dir), "%s/%016llx", root,
           (unsigned long long)ttpu_disk_namespace_id(&ns));
  DIR* dd = ok ? opendir(dir) : NULL;
  struct dirent* f;
  int files = 0;
  while (dd && (f = readdir(dd))) {
    if (f->d_name[0] == '.') continue;
    files++;
    snprintf(path, sizeof(path), "%s/%s", dir, f->d_name);
  }
  if (dd) closedir(dd);
  ttpu_disk_record r;
  ok = ok && files == 1 && ttpu_disk_read_file(path, &r);
  if (ok) {
    ok = r.ns == ttpu_disk_namespace_id(&ns) && r.n_key == 3 &&
         !memcmp(r.key, key, sizeof(key)) && r.n_results == 2 &&
         !memcmp(r.results, plans, sizeof(plans)) && r.exe_len == sizeof(exe) &&
         !memcmp(r.exe, exe, sizeof(exe));
    ttpu_disk_record_free(&r);
  }
  /* One flipped byte fails the checksum. */
  FILE* fp = ok ? fopen(path, "r+b") : NULL;
  if (fp) {
    fseek(fp, 30, SEEK_SET);
    int c = fgetc(fp);
    fseek(fp, 30, SEEK_SET);
    fputc(c ^ 0x40, fp);
    fclose(fp);
    ok = !ttpu_disk_read_file(path, &r) && !ttpu_disk_contains(d, key, 3);
  } else {
    ok = 0;
  }
  ttpu_disk_close(d);
  ttpu_disk_close(d2);
  if (s) ttpu_status_free(s);
  remove_tree(root);
  free(root);
  TTPU_CHECK(t, ok);
}

typedef struct {
  int calls;
  int64_t key[256];
  size_t n_key;
  int text_ok;
  int n_results;
} sink_seen;

static void remember(void* user, const char* what, const int64_t* key,
                     size_t n_key, const char* text, size_t text_len,
                     const void* results, size_t results_len, int n_results,
                     const void* options, size_t options_len) {
  (void)what;
  (void)results;
  (void)options;
  (void)options_len;
  sink_seen* s = user;
  s->calls++;
  s->n_key = n_key < 256 ? n_key : 256;
  memcpy(s->key, key, s->n_key * sizeof(*key));
  s->text_ok = text_len > 0 && strstr(text, "func.func") != NULL;
  s->n_results = results_len == (size_t)n_results * sizeof(ttpu_result_plan)
                     ? n_results
                     : -1;
}

/* The runtime's disk cache lives under the id ttpu_disk_namespace_id
 * gives for what its client reports, and its entry's key is the key the
 * sink was handed. */
static void test_runtime_namespace_and_sink(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  char* root = make_tmpdir();
  sink_seen seen;
  memset(&seen, 0, sizeof(seen));
  ttpu_status* s = ttpu_runtime_set_cache_dir(rt, root, 0);
  if (!s) s = ttpu_aot_set_program_sink(rt, remember, &seen);
  float v[5] = {1, 2, 3, 4, 5.5f};
  ttpu_buffer *x = NULL, *y = NULL;
  if (!s) {
    x = ttpu_test_upload_f32(t, rt, v, 5);
    y = ttpu_test_upload_f32(t, rt, v, 5);
  }
  int ok = !s && x && y;
  if (ok) {
    int64_t sizes[1] = {5}, strides[1] = {1};
    ttpu_tensor tx = {x, TTPU_F32, 1, sizes, strides, 0};
    ttpu_tensor ty = {y, TTPU_F32, 1, sizes, strides, 0};
    s = ttpu_test_add(rt, &tx, &tx, &ty, 1.0);
    if (!s) s = ttpu_runtime_synchronize(rt, -1);
    ok = !s;
  }
  ttpu_status_free(ttpu_aot_set_program_sink(rt, NULL, NULL));
  int major = 0, minor = 0;
  ttpu_runtime_plugin_api_version(rt, &major, &minor);
  ttpu_caps caps;
  ttpu_runtime_caps(rt, &caps);
  ttpu_disk_namespace ns;
  ttpu_disk_namespace_make(ttpu_runtime_platform_name(rt),
                           ttpu_runtime_platform_version(rt), major, minor,
                           ttpu_runtime_compile_options_id(rt), caps.host_code,
                           &ns);
  char dir[700], path[1000] = {0};
  snprintf(dir, sizeof(dir), "%s/%016llx", root,
           (unsigned long long)ttpu_disk_namespace_id(&ns));
  DIR* dd = ok ? opendir(dir) : NULL;
  struct dirent* f;
  int files = 0;
  while (dd && (f = readdir(dd))) {
    if (f->d_name[0] == '.') continue;
    files++;
    snprintf(path, sizeof(path), "%s/%s", dir, f->d_name);
  }
  if (dd) closedir(dd);
  ttpu_disk_record r;
  ok = ok && seen.calls == 1 && seen.text_ok && seen.n_results >= 1 &&
       files == 1 && ttpu_disk_read_file(path, &r);
  if (ok) {
    ok = r.n_key == seen.n_key &&
         !memcmp(r.key, seen.key, r.n_key * sizeof(int64_t)) &&
         r.n_results == seen.n_results;
    ttpu_disk_record_free(&r);
  }
  if (s) {
    ttpu_test_fail(t, __FILE__, __LINE__, "%s", ttpu_status_message(s));
    ttpu_status_free(s);
  }
  if (x) ttpu_buffer_release(x);
  if (y) ttpu_buffer_release(y);
  ttpu_runtime_destroy(rt);
  remove_tree(root);
  free(root);
  TTPU_CHECK(t, ok);
}

static const ttpu_test kTests[] = {
    {"namespace_id", test_namespace_id},
    {"store_serialized_reads_back", test_store_serialized_reads_back},
    {"runtime_namespace_and_sink", test_runtime_namespace_and_sink},
    {NULL, NULL}};
TTPU_TEST_SUITE(disk, kTests)
