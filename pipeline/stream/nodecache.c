/*
 * nodecache.c - the node cache (nodecache.h): sets of records, kept in chunks,
 * within one budget.
 *
 * Locks: the cache's lock guards its list of sets, each set's users and
 * the budget; a set's lock guards its chunks and the adding of records.
 * A set's lock may be held while the cache's is taken, never the other
 * way round. A set is freed only under the cache's lock with no users,
 * so no stream holds a pointer into it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "nodecache.h"

struct nc_chunk {
	struct nc_chunk *next;
	uint64_t size, used;
	unsigned char data[];
};

/* One record's place: its bytes (NULL: not cached) and length. */
struct nc_ent {
	const unsigned char *p;
	uint64_t len;
};

struct nodecache_set {
	struct nodecache *c;
	struct nodecache_set *prev,
		*next; /* in c's list, the newest use first */
	uint32_t n;
	struct nodecache_file *files;
	uint64_t *base;	     /* shard i's records start at flat[base[i]] */
	struct nc_ent *flat; /* one per record */
	uint32_t users;	     /* under c->lock */
	uint64_t charged;    /* bytes of the budget, under c->lock */
	pthread_mutex_t lock;
	struct nc_chunk *chunks; /* under lock; the first has the room */
	uint64_t records;	 /* cached; an atomic, written under lock */
	uint64_t total;		 /* records in the files */
	bool full;		 /* the budget had no room: stop trying */
	uint64_t hits, misses;	 /* atomics */
};

struct nodecache {
	pthread_mutex_t lock;
	uint64_t budget, used;
	struct nodecache_set *head, *tail;
	uint32_t sets, attached;
	uint64_t hits, misses; /* of sets freed */
};

int nodecache_new(struct nodecache **out, uint64_t budget)
{
	struct nodecache *c;

	*out = NULL;
	if (!budget)
		return 0;
	c = mem_calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	c->budget = budget;
	*out = c;
	return 0;
}

static void unlink_set(struct nodecache *c, struct nodecache_set *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		c->head = s->next;
	if (s->next)
		s->next->prev = s->prev;
	else
		c->tail = s->prev;
	s->prev = s->next = NULL;
}

static void push_front(struct nodecache *c, struct nodecache_set *s)
{
	s->next = c->head;
	s->prev = NULL;
	if (c->head)
		c->head->prev = s;
	c->head = s;
	if (!c->tail)
		c->tail = s;
}

/* Free set s (no users), under c->lock. */
static void drop_set(struct nodecache *c, struct nodecache_set *s)
{
	struct nc_chunk *k = s->chunks;

	unlink_set(c, s);
	c->used -= s->charged;
	c->sets--;
	c->hits += s->hits;
	c->misses += s->misses;
	while (k) {
		struct nc_chunk *next = k->next;

		free(k);
		k = next;
	}
	pthread_mutex_destroy(&s->lock);
	free(s->flat);
	free(s->base);
	free(s->files);
	free(s);
}

/*
 * Take bytes from the budget for set s, dropping sets no stream uses,
 * the least recently used first, while it lacks room. Under c->lock.
 */
static bool charge(struct nodecache *c, struct nodecache_set *s, uint64_t bytes)
{
	struct nodecache_set *v = c->tail;

	while (c->used + bytes > c->budget && v) {
		struct nodecache_set *prev = v->prev;

		if (v != s && !v->users)
			drop_set(c, v);
		v = prev;
	}
	if (c->used + bytes > c->budget)
		return false;
	c->used += bytes;
	if (s)
		s->charged += bytes;
	return true;
}

void nodecache_free(struct nodecache *c)
{
	if (!c)
		return;
	while (c->head)
		drop_set(c, c->head);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static bool same_files(const struct nodecache_set *s,
		       const struct nodecache_file *files, uint32_t n)
{
	return s->n == n && !memcmp(s->files, files, n * sizeof(*files));
}

/* A new set of n files, with its index charged; NULL without room. */
static struct nodecache_set *
new_set(struct nodecache *c, const struct nodecache_file *files, uint32_t n)
{
	struct nodecache_set *s;
	uint64_t total = 0;

	for (uint32_t i = 0; i < n; i++) {
		if (files[i].records > (UINT64_MAX >> 4) - total)
			return NULL;
		total += files[i].records;
	}
	s = mem_calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->c = c;
	s->n = n;
	s->files = mem_alloc(n * sizeof(*files));
	s->base = mem_calloc(n, sizeof(*s->base));
	s->flat = mem_calloc(total ? total : 1, sizeof(*s->flat));
	if (!s->files || !s->base || !s->flat ||
	    !charge(c, s, total * sizeof(*s->flat))) {
		free(s->files);
		free(s->base);
		free(s->flat);
		free(s);
		return NULL;
	}
	memcpy(s->files, files, n * sizeof(*files));
	s->total = total;
	for (uint32_t i = 1; i < n; i++)
		s->base[i] = s->base[i - 1] + files[i - 1].records;
	pthread_mutex_init(&s->lock, NULL);
	c->sets++;
	return s;
}

struct nodecache_set *nodecache_attach(struct nodecache *c,
				       const struct nodecache_file *files,
				       uint32_t n)
{
	struct nodecache_set *s;

	if (!c || !n)
		return NULL;
	pthread_mutex_lock(&c->lock);
	for (s = c->head; s && !same_files(s, files, n); s = s->next)
		;
	if (s)
		unlink_set(c, s);
	else
		s = new_set(c, files, n);
	if (s) {
		push_front(c, s);
		if (!s->users++)
			c->attached++;
	}
	pthread_mutex_unlock(&c->lock);
	return s;
}

void nodecache_detach(struct nodecache_set *s)
{
	struct nodecache *c;

	if (!s)
		return;
	c = s->c;
	pthread_mutex_lock(&c->lock);
	if (!--s->users)
		c->attached--;
	pthread_mutex_unlock(&c->lock);
}

const unsigned char *nodecache_get(const struct nodecache_set *s, uint32_t i,
				   uint64_t rec, uint32_t *len)
{
	const struct nc_ent *e;
	const unsigned char *p;

	if (!s || i >= s->n || rec >= s->files[i].records)
		return NULL;
	e = &s->flat[s->base[i] + rec];
	/* len is stored before p is published (release): read it after. */
	p = __atomic_load_n(&e->p, __ATOMIC_ACQUIRE);
	if (p)
		*len = (uint32_t)e->len;
	return p;
}

void nodecache_prefetch(const struct nodecache_set *s, uint32_t i, uint64_t rec)
{
	if (s && i < s->n && rec < s->files[i].records)
		__builtin_prefetch(&s->flat[s->base[i] + rec]);
}

bool nodecache_complete(const struct nodecache_set *s)
{
	return s && s->total &&
	       __atomic_load_n(&s->records, __ATOMIC_ACQUIRE) == s->total;
}

/* Is there a set but s that no stream uses? Under c->lock. */
static bool has_idle(const struct nodecache *c, const struct nodecache_set *s)
{
	for (const struct nodecache_set *v = c->head; v; v = v->next)
		if (v != s && !v->users)
			return true;
	return false;
}

/* Room for len bytes in s's chunks, a new chunk if need be; under s->lock. */
static unsigned char *room(struct nodecache_set *s, uint32_t len)
{
	struct nc_chunk *k = s->chunks;
	uint64_t size;
	bool ok;

	if (k && k->size - k->used >= len) {
		unsigned char *p = k->data + k->used;

		k->used += len;
		return p;
	}
	size = len > NODECACHE_CHUNK - sizeof(*k) ? (uint64_t)len + sizeof(*k) :
						    NODECACHE_CHUNK;
	pthread_mutex_lock(&s->c->lock);
	/*
	 * The budget's last piece may be smaller than a chunk, when no set
	 * that nobody uses could make room.
	 */
	if (s->c->used + size > s->c->budget && !has_idle(s->c, s) &&
	    s->c->budget - s->c->used >= (uint64_t)len + sizeof(*k))
		size = s->c->budget - s->c->used;
	ok = charge(s->c, s, size);
	pthread_mutex_unlock(&s->c->lock);
	if (!ok)
		return NULL;
	k = mem_alloc(size);
	if (!k) {
		pthread_mutex_lock(&s->c->lock);
		s->c->used -= size;
		s->charged -= size;
		pthread_mutex_unlock(&s->c->lock);
		return NULL;
	}
	k->size = size - sizeof(*k);
	k->used = len;
	k->next = s->chunks;
	s->chunks = k;
	return k->data;
}

bool nodecache_put(struct nodecache_set *s, uint32_t i, uint64_t rec,
		   const void *p, uint32_t len)
{
	struct nc_ent *e;
	unsigned char *to;
	bool ok = true;

	if (!s || i >= s->n || rec >= s->files[i].records ||
	    len > UINT32_MAX - 8 || __atomic_load_n(&s->full, __ATOMIC_RELAXED))
		return false;
	e = &s->flat[s->base[i] + rec];
	pthread_mutex_lock(&s->lock);
	if (!e->p) {
		/* 8-aligned, so the records' fields are as aligned as in a file. */
		to = room(s, (uint32_t)(((uint64_t)len + 7) / 8 * 8 + !len));
		if (to) {
			memcpy(to, p, len);
			e->len = len;
			__atomic_store_n(&e->p, to, __ATOMIC_RELEASE);
			/*
			 * After the entry (release): a count seen complete
			 * (nodecache_complete()) shows every entry.
			 */
			__atomic_store_n(&s->records, s->records + 1,
					 __ATOMIC_RELEASE);
		} else {
			__atomic_store_n(&s->full, true, __ATOMIC_RELAXED);
			ok = false;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return ok;
}

bool nodecache_full(const struct nodecache_set *s)
{
	return s && __atomic_load_n(&s->full, __ATOMIC_RELAXED);
}

void nodecache_count(struct nodecache_set *s, uint64_t hits, uint64_t misses)
{
	if (!s)
		return;
	if (hits)
		__atomic_fetch_add(&s->hits, hits, __ATOMIC_RELAXED);
	if (misses)
		__atomic_fetch_add(&s->misses, misses, __ATOMIC_RELAXED);
}

void nodecache_stats(struct nodecache *c, struct nodecache_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	st->budget = c->budget;
	st->used = c->used;
	st->sets = c->sets;
	st->attached = c->attached;
	st->hits = c->hits;
	st->misses = c->misses;
	/* No set's lock here: a set's lock is taken before the cache's. */
	for (struct nodecache_set *s = c->head; s; s = s->next) {
		st->hits += __atomic_load_n(&s->hits, __ATOMIC_RELAXED);
		st->misses += __atomic_load_n(&s->misses, __ATOMIC_RELAXED);
		st->records += __atomic_load_n(&s->records, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&c->lock);
}
