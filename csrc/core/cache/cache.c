/* cache.c - a chained hash map from signature words to executables, with
 * a least-recently-used list for eviction. */
#include <stdlib.h>
#include <string.h>

#include "cache.h"

typedef struct node {
  struct node* next;             /* hash chain */
  struct node *newer, *older;    /* recency list */
  uint64_t hash;
  size_t n;
  int64_t* key;
  ttpu_cache_entry entry;
} node;

struct ttpu_cache {
  node** buckets;
  size_t n_buckets;
  size_t size;
  size_t capacity;               /* 0: unbounded */
  node *newest, *oldest;
  ttpu_cache_retire_fn retire;
  void* retire_ctx;
  int64_t evictions;
  /* Hashes of the most recent evictions, a ring of ghost_cap. */
  uint64_t* ghosts;
  size_t ghost_cap, n_ghosts, ghost_at;
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

ttpu_status* ttpu_cache_create(size_t capacity, ttpu_cache_retire_fn retire,
                               void* retire_ctx, ttpu_cache** out) {
  *out = NULL;
  ttpu_cache* c = calloc(1, sizeof(*c));
  if (c) c->buckets = calloc(256, sizeof(node*));
  if (!c || !c->buckets) {
    free(c);
    return ttpu_status_oom();
  }
  c->n_buckets = 256;
  c->retire = retire;
  c->retire_ctx = retire_ctx;
  ttpu_cache_set_capacity(c, capacity);
  *out = c;
  return NULL;
}

static void free_node(node* n, ttpu_pjrt_client* client) {
  if (client) ttpu_pjrt_exec_destroy(client, n->entry.exec);
  free(n->entry.results);
  free(n->key);
  free(n);
}

void ttpu_cache_destroy(ttpu_cache* c, ttpu_pjrt_client* client) {
  if (!c) return;
  for (node* n = c->newest; n;) {
    node* older = n->older;
    free_node(n, client);
    n = older;
  }
  free(c->buckets);
  free(c->ghosts);
  free(c);
}

static void unlink_lru(ttpu_cache* c, node* p) {
  if (p->newer) p->newer->older = p->older;
  else c->newest = p->older;
  if (p->older) p->older->newer = p->newer;
  else c->oldest = p->newer;
  p->newer = p->older = NULL;
}

static void push_newest(ttpu_cache* c, node* p) {
  p->older = c->newest;
  p->newer = NULL;
  if (c->newest) c->newest->newer = p;
  c->newest = p;
  if (!c->oldest) c->oldest = p;
}

ttpu_cache_entry* ttpu_cache_find(ttpu_cache* c, const int64_t* key,
                                  size_t n) {
  uint64_t h = hash_words(key, n);
  for (node* p = c->buckets[h & (c->n_buckets - 1)]; p; p = p->next)
    if (p->hash == h && p->n == n && !memcmp(p->key, key, n * sizeof(*key))) {
      if (c->newest != p) {
        unlink_lru(c, p);
        push_newest(c, p);
      }
      return &p->entry;
    }
  return NULL;
}

int ttpu_cache_was_evicted(const ttpu_cache* c, const int64_t* key,
                           size_t n) {
  if (!c->n_ghosts) return 0;
  uint64_t h = hash_words(key, n);
  for (size_t i = 0; i < c->n_ghosts; ++i)
    if (c->ghosts[i] == h) return 1;
  return 0;
}

static void remember_ghost(ttpu_cache* c, uint64_t h) {
  if (!c->ghost_cap) return;
  c->ghosts[c->ghost_at] = h;
  c->ghost_at = (c->ghost_at + 1) % c->ghost_cap;
  if (c->n_ghosts < c->ghost_cap) c->n_ghosts++;
}

static void unlink_chain(ttpu_cache* c, node* p) {
  node** at = &c->buckets[p->hash & (c->n_buckets - 1)];
  while (*at != p) at = &(*at)->next;
  *at = p->next;
}

/* Evicts least recently used unpinned entries while more than `limit`
 * are kept, never `keep` (the entry being handed out). */
static void evict_down_to(ttpu_cache* c, const node* keep, size_t limit) {
  node* p = c->oldest;
  while (c->size > limit && p) {
    node* newer = p->newer;
    if (p != keep && p->entry.pins == 0) {
      unlink_lru(c, p);
      unlink_chain(c, p);
      c->size--;
      c->evictions++;
      remember_ghost(c, p->hash);
      if (c->retire) {
        c->retire(c->retire_ctx, &p->entry);
        p->entry.exec = NULL;
        p->entry.results = NULL;
      }
      free_node(p, NULL);
    }
    p = newer;
  }
}

static void evict_to_capacity(ttpu_cache* c, const node* keep) {
  if (c->capacity) evict_down_to(c, keep, c->capacity);
}

void ttpu_cache_evict_unpinned(ttpu_cache* c) { evict_down_to(c, NULL, 0); }

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
    return ttpu_status_oom();
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
  push_newest(c, p);
  c->size++;
  evict_to_capacity(c, p);
  *out = &p->entry;
  return NULL;
}

void ttpu_cache_set_capacity(ttpu_cache* c, size_t capacity) {
  c->capacity = capacity;
  /* The ghosts cover one cache's worth of evictions (at least a few
   * hundred, so a small cache still tells reloads apart). */
  size_t want = capacity ? (capacity < 256 ? 256 : capacity) : 0;
  if (want != c->ghost_cap) {
    uint64_t* g = want ? calloc(want, sizeof(*g)) : NULL;
    if (want && !g) want = 0; /* no memory: reloads look like new programs */
    free(c->ghosts);
    c->ghosts = g;
    c->ghost_cap = want;
    c->n_ghosts = c->ghost_at = 0;
  }
  evict_to_capacity(c, NULL);
}

size_t ttpu_cache_capacity(const ttpu_cache* c) { return c->capacity; }
size_t ttpu_cache_size(const ttpu_cache* c) { return c->size; }
int64_t ttpu_cache_evictions(const ttpu_cache* c) { return c->evictions; }

void ttpu_cache_each(const ttpu_cache* c,
                     int (*fn)(void* user, const ttpu_cache_entry* e),
                     void* user) {
  for (const node* p = c->newest; p; p = p->older)
    if (fn(user, &p->entry)) return;
}
