/* cache.c - a chained hash map from signature words to executables. */
#include <stdlib.h>
#include <string.h>

#include "cache.h"

typedef struct node {
  struct node* next;
  uint64_t hash;
  size_t n;
  int64_t* key;
  ttpu_cache_entry entry;
} node;

struct ttpu_cache {
  node** buckets;
  size_t n_buckets;
  size_t size;
};

static uint64_t hash_words(const int64_t* k, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= (uint64_t)k[i];
    h *= 1099511628211ull;
    h ^= h >> 29;
  }
  return h;
}

ttpu_status* ttpu_cache_create(ttpu_cache** out) {
  ttpu_cache* c = calloc(1, sizeof(*c));
  if (c) c->buckets = calloc(256, sizeof(node*));
  if (!c || !c->buckets) {
    free(c);
    return ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of host memory");
  }
  c->n_buckets = 256;
  *out = c;
  return NULL;
}

void ttpu_cache_destroy(ttpu_cache* c, ttpu_pjrt_client* client) {
  if (!c) return;
  for (size_t i = 0; i < c->n_buckets; ++i) {
    node* n = c->buckets[i];
    while (n) {
      node* next = n->next;
      ttpu_pjrt_exec_destroy(client, n->entry.exec);
      free(n->entry.results);
      free(n->key);
      free(n);
      n = next;
    }
  }
  free(c->buckets);
  free(c);
}

ttpu_cache_entry* ttpu_cache_find(ttpu_cache* c, const int64_t* key,
                                  size_t n) {
  uint64_t h = hash_words(key, n);
  for (node* p = c->buckets[h & (c->n_buckets - 1)]; p; p = p->next)
    if (p->hash == h && p->n == n && !memcmp(p->key, key, n * sizeof(*key)))
      return &p->entry;
  return NULL;
}

static void grow(ttpu_cache* c) {
  size_t nb = c->n_buckets * 2;
  node** b = calloc(nb, sizeof(node*));
  if (!b) return; /* keep the old table: slower, still correct */
  for (size_t i = 0; i < c->n_buckets; ++i) {
    node* n = c->buckets[i];
    while (n) {
      node* next = n->next;
      n->next = b[n->hash & (nb - 1)];
      b[n->hash & (nb - 1)] = n;
      n = next;
    }
  }
  free(c->buckets);
  c->buckets = b;
  c->n_buckets = nb;
}

ttpu_status* ttpu_cache_insert(ttpu_cache* c, const int64_t* key, size_t n,
                               const ttpu_cache_entry* e,
                               ttpu_cache_entry** out) {
  node* p = calloc(1, sizeof(*p));
  int64_t* k = malloc((n ? n : 1) * sizeof(*k));
  if (!p || !k) {
    free(p);
    free(k);
    return ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of host memory");
  }
  memcpy(k, key, n * sizeof(*k));
  p->hash = hash_words(key, n);
  p->n = n;
  p->key = k;
  p->entry = *e;
  if (c->size + 1 > c->n_buckets) grow(c);
  size_t i = p->hash & (c->n_buckets - 1);
  p->next = c->buckets[i];
  c->buckets[i] = p;
  c->size++;
  *out = &p->entry;
  return NULL;
}

size_t ttpu_cache_size(const ttpu_cache* c) { return c->size; }
