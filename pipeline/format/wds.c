/*
 * wds.c - a WebDataset-style tar (wds.h): the scan of its headers into
 * samples and schema, and the index a stream reads it in place with.
 *
 * The scan keeps, per sample, its key and where each member lies; a
 * table of the keys seen finds a key met again after other samples.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dsfiles.h"
#include "fault.h"
#include "fdio.h"
#include "loader_error.h"
#include "shard.h"
#include "tar.h"
#include "wds.h"

#define INT_TEXT_MAX 64

/* A member of the sample being scanned. */
struct scan_member {
	char ext[WDS_EXT_MAX + 1]; /* lower case */
	uint16_t spell;
	uint64_t off;
	uint32_t len;
};

struct wds {
	char *name; /* the tar, for messages */
	struct schema schema;
	uint64_t count;
	/* Per field: its extension in lower case, as the schema orders them. */
	char ext[SCHEMA_MAX_FIELDS][WDS_EXT_MAX + 1];
	/* Every spelling of an extension met in the tar (for messages). */
	char (*spell)[WDS_EXT_MAX + 1];
	unsigned nspell;
	/* Sample keys, NUL-terminated, back to back in one arena. */
	char *keys;
	size_t keys_len, keys_cap;
	uint64_t *key_off;	/* per sample */
	struct wds_item *items; /* count * nfields */
	uint64_t cap;		/* samples that key_off and items hold */
	uint8_t conv[SCHEMA_MAX_FIELDS]; /* enum rec_conv */
	char *ragged;			 /* wds_scan()'s, or NULL */
	int fd;				 /* during the scan */
};

/* State of the one scan in open(). */
struct scan {
	struct wds *s;
	/* Open addressing over sample indexes + 1, to find repeated keys. */
	uint64_t *hash;
	size_t hash_cap;
	/* The sample being collected: its members and first header. */
	struct scan_member m[SCHEMA_MAX_FIELDS];
	unsigned nm;
	bool open;
	uint64_t first_off;
};

/* Extensions whose members hold a decimal integer (WebDataset labels). */
static const char *const int_exts[] = {
	"cls", "cls2", "label", "index", "idx", NULL,
};

static const char *const jpeg_exts[] = { "jpg", "jpeg", NULL };

static bool in_list(const char *const *list, const char *s)
{
	for (; *list; list++)
		if (!strcmp(*list, s))
			return true;
	return false;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}
static const char *key_of(const struct wds *s, uint64_t i)
{
	return s->keys + s->key_off[i];
}

static uint64_t hash_str(const char *p)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	for (; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
	return h;
}

/* The slot of key in the table: its sample + 1, or the empty slot for it. */
static uint64_t *hash_slot(struct scan *sc, const char *key)
{
	size_t mask = sc->hash_cap - 1, i = hash_str(key) & mask;

	while (sc->hash[i] && strcmp(key_of(sc->s, sc->hash[i] - 1), key))
		i = (i + 1) & mask;
	return &sc->hash[i];
}

/* Keep the table at most half full. */
static int hash_grow(struct scan *sc, uint64_t count)
{
	uint64_t *old = sc->hash;
	size_t old_cap = sc->hash_cap;

	if (old_cap && count < old_cap / 2)
		return 0;
	sc->hash_cap = old_cap ? old_cap * 2 : 1024;
	sc->hash = calloc(sc->hash_cap, sizeof(*sc->hash));
	if (!sc->hash) {
		sc->hash = old;
		sc->hash_cap = old_cap;
		return -ENOMEM;
	}
	for (size_t i = 0; i < old_cap; i++)
		if (old[i])
			*hash_slot(sc, key_of(sc->s, old[i] - 1)) = old[i];
	free(old);
	return 0;
}

/* Index of the spelling of an extension, added if new. */
static int intern_spell(struct wds *s, const char *ext, uint16_t *out)
{
	void *p;

	for (unsigned i = 0; i < s->nspell; i++) {
		if (!strcmp(s->spell[i], ext)) {
			*out = (uint16_t)i;
			return 0;
		}
	}
	if (s->nspell == UINT16_MAX + 1u)
		return LOADER_ETOOBIG;
	p = realloc(s->spell, (s->nspell + 1) * sizeof(*s->spell));
	if (!p)
		return -ENOMEM;
	s->spell = p;
	snprintf(s->spell[s->nspell], WDS_EXT_MAX + 1, "%s", ext);
	*out = (uint16_t)s->nspell++;
	return 0;
}

static int cmp_members(const void *a, const void *b)
{
	return strcmp(((const struct scan_member *)a)->ext,
		      ((const struct scan_member *)b)->ext);
}

/* The schema's dtype of a .npy array's elements; DT_NONE if none fits. */
static uint8_t npy_dtype(const struct npy_info *n)
{
	static const struct {
		char kind;
		uint32_t size;
		uint8_t dt;
	} map[] = {
		{ 'b', 1, DT_U8 },  { 'u', 1, DT_U8 },	{ 'i', 1, DT_I8 },
		{ 'u', 2, DT_U16 }, { 'i', 2, DT_I16 }, { 'u', 4, DT_U32 },
		{ 'i', 4, DT_I32 }, { 'u', 8, DT_U64 }, { 'i', 8, DT_I64 },
		{ 'f', 2, DT_F16 }, { 'f', 4, DT_F32 }, { 'f', 8, DT_F64 },
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (map[i].kind == n->kind && map[i].size == n->itemsize)
			return map[i].dt;
	return DT_NONE;
}

/* "(3, 4)": a shape for messages. */
static void shape_text(const uint64_t *dims, uint32_t ndim, char *out, size_t n)
{
	size_t k = (size_t)snprintf(out, n, "(");

	for (uint32_t i = 0; i < ndim && k < n; i++)
		k += (size_t)snprintf(out + k, n - k, "%s%llu", i ? ", " : "",
				      (unsigned long long)dims[i]);
	if (k < n)
		snprintf(out + k, n - k, ")");
}

/*
 * Read and parse the .npy header of the member at off (len bytes) into
 * info, checking that len is exactly header and array. where names the
 * member for d.
 */
static int read_npy_header(int fd, uint64_t off, uint32_t len,
			   struct npy_info *info, const char *where,
			   struct diag *d)
{
	unsigned char hdr[NPY_HEADER_MAX + 16];
	size_t n = len < sizeof(hdr) ? len : sizeof(hdr);
	int err = fdio_pread_all(fd, hdr, n, off);

	if (!err)
		err = npy_parse(hdr, n, info, d);
	if (err == LOADER_ETRUNC)
		return diag_set(d, err, "%s: read: the tar file shrank", where);
	if (!err)
		err = npy_check_size(info, len, d);
	if (err)
		return diag_wrap(d, err, "%s", where);
	return 0;
}

static bool in_csv(const char *list, const char *name);

/* ragged "*": any .npy field may turn out ragged (a tar read in place). */
static bool ragged_auto(const struct wds *s)
{
	return s->ragged && !strcmp(s->ragged, "*");
}

/* A tensor field from the first sample's .npy member. */
static int npy_field(struct wds *s, const struct scan_member *m,
		     struct field *f, struct diag *d)
{
	struct npy_info n;
	char where[256], shape[128];
	int err;

	snprintf(where, sizeof(where), "%s: member %s.%s at offset %" PRIu64,
		 s->name, key_of(s, 0), s->spell[m->spell], m->off);
	err = read_npy_header(s->fd, m->off, m->len, &n, where, d);
	if (err)
		return err;
	shape_text(n.dims, n.ndim, shape, sizeof(shape));
	if (n.fortran)
		return diag_set(
			d, -ENOTSUP,
			"%s: a Fortran-order array (save it with np.ascontiguousarray)",
			where);
	f->kind = FIELD_TENSOR;
	f->dtype = npy_dtype(&n);
	if (n.ndim > SCHEMA_MAX_DIMS)
		return diag_set(d, -ENOTSUP,
				"%s: shape %s has more than %d dimensions",
				where, shape, SCHEMA_MAX_DIMS);
	f->ndim = (uint8_t)n.ndim;
	for (uint32_t i = 0; i < n.ndim; i++) {
		/* An empty first array: only a ragged field can have it. */
		if (i == 0 && n.dims[0] == 0 &&
		    (in_csv(s->ragged, f->name) || ragged_auto(s))) {
			f->dims[0] = 0;
			continue;
		}
		if (n.dims[i] == 0 || n.dims[i] > UINT32_MAX)
			return diag_set(
				d, -ENOTSUP,
				"%s: shape %s: a dimension of 0 or above 2^32%s",
				where, shape,
				i == 0 && n.dims[0] == 0 ?
					" (an array whose first dimension varies is packed with --ragged FIELD)" :
					"");
		f->dims[i] = (uint32_t)n.dims[i];
	}
	return 0;
}

/* Is name one of the comma-separated names of list (NULL: none)? */
static bool in_csv(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; p && *p;) {
		const char *e = strchr(p, ',');
		size_t l = e ? (size_t)(e - p) : strlen(p);

		if (l == n && !memcmp(p, name, n))
			return true;
		p = e ? e + 1 : p + l;
	}
	return false;
}

/* Every name of --ragged must be a ragged tensor of the schema now. */
static int check_ragged(const struct wds *s, struct diag *d)
{
	const struct schema *sch = &s->schema;

	if (ragged_auto(s))
		return 0;
	for (const char *p = s->ragged; p && *p;) {
		const char *e = strchr(p, ',');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		int k = -1;

		for (unsigned i = 0; i < sch->nfields && k < 0; i++)
			if (strlen(sch->f[i].name) == l &&
			    !memcmp(sch->f[i].name, p, l))
				k = (int)i;
		if (k < 0 || !field_ragged(&sch->f[k]))
			return diag_set(
				d, LOADER_EUSAGE, "--ragged %.*s: %s", (int)l,
				p,
				k < 0 ? "no such field in the tar (its fields are its member extensions)" :
					"not a .npy field (bytes fields are ragged already)");
		p = e ? e + 1 : p + l;
	}
	return 0;
}

/* The schema, from the first sample's extensions (sorted already). */
static int make_schema(struct wds *s, struct scan *sc, struct diag *d)
{
	struct schema *sch = &s->schema;

	sch->nfields = sc->nm;
	for (unsigned k = 0; k < sc->nm; k++) {
		struct field *f = &sch->f[k];
		const char *ext = sc->m[k].ext;

		memcpy(s->ext[k], ext, sizeof(s->ext[k]));
		memset(f, 0, sizeof(*f));
		/* Field names allow [A-Za-z0-9_.-]; anything else is '_'. */
		for (size_t i = 0; ext[i]; i++) {
			char c = ext[i];
			bool ok = (c >= 'a' && c <= 'z') ||
				  (c >= 'A' && c <= 'Z') ||
				  (c >= '0' && c <= '9') || c == '_' ||
				  c == '.' || c == '-';

			f->name[i] = ok ? c : '_';
		}
		s->conv[k] = REC_AS_IS;
		if (in_list(jpeg_exts, ext)) {
			f->kind = FIELD_JPEG;
		} else if (in_list(int_exts, ext)) {
			f->kind = FIELD_TENSOR;
			f->dtype = DT_I64;
			s->conv[k] = REC_INT_TEXT;
		} else if (!strcmp(ext, "npy") || ends_with(ext, ".npy")) {
			int err = npy_field(s, &sc->m[k], f, d);

			if (err)
				return err;
			s->conv[k] = REC_NPY;
			if (in_csv(s->ragged, f->name)) {
				if (!f->ndim)
					return diag_set(
						d, LOADER_EUSAGE,
						"--ragged %s: the first sample's array is a scalar: nothing to vary",
						f->name);
				f->dims[0] = 0; /* "*" */
			}
		} else {
			f->kind = FIELD_BYTES;
		}
		for (unsigned j = 0; j < k; j++)
			if (!strcmp(sch->f[j].name, f->name))
				return diag_set(
					d, LOADER_ESCHEMA,
					"%s: offset %" PRIu64
					": sample \"%s\": extensions \"%s\" and \"%s\" both become field \"%s\"",
					s->name, sc->first_off, key_of(s, 0),
					s->ext[j], ext, f->name);
	}
	return 0;
}

/*
 * Close the sample being collected: the first one sets the schema, every
 * later one must have exactly its extensions.
 */
static int finish_sample(struct scan *sc, struct diag *d)
{
	struct wds *s = sc->s;
	struct schema *sch = &s->schema;
	uint64_t n = s->count;
	struct wds_item *it;
	unsigned k;
	int err;

	if (!sc->open)
		return 0;
	sc->open = false;
	qsort(sc->m, sc->nm, sizeof(sc->m[0]), cmp_members);
	if (n == 0) {
		err = make_schema(s, sc, d);
		if (!err)
			err = check_ragged(s, d);
		if (err)
			return err;
	}
	/* Both lists are sorted: the first difference is what is wrong. */
	for (k = 0; k < sch->nfields && k < sc->nm; k++)
		if (strcmp(s->ext[k], sc->m[k].ext))
			break;
	if (k < sch->nfields || k < sc->nm) {
		bool missing =
			k == sc->nm || (k < sch->nfields &&
					strcmp(s->ext[k], sc->m[k].ext) < 0);

		if (missing)
			return diag_set(
				d, LOADER_ESCHEMA,
				"%s: offset %" PRIu64
				": sample \"%s\" has no .%s member (the first sample, \"%s\", has one)",
				s->name, sc->first_off, key_of(s, n), s->ext[k],
				key_of(s, 0));
		return diag_set(
			d, LOADER_ESCHEMA,
			"%s: offset %" PRIu64
			": sample \"%s\" has an extra member \"%s.%s\" (the first sample, \"%s\", has no .%s)",
			s->name, sc->first_off, key_of(s, n), key_of(s, n),
			s->spell[sc->m[k].spell], key_of(s, 0), sc->m[k].ext);
	}
	if (!s->items) {
		s->items = calloc(s->cap * sch->nfields, sizeof(*s->items));
		if (!s->items)
			return -ENOMEM;
	}
	it = s->items + n * sch->nfields;
	for (k = 0; k < sc->nm; k++)
		it[k] = (struct wds_item){ sc->m[k].off, sc->m[k].len,
					   sc->m[k].spell };
	s->count = n + 1;
	return 0;
}

/* Make room for one more sample's key offset and items. */
static int grow_samples(struct wds *s)
{
	uint64_t n = s->count, cap;
	size_t nf = s->schema.nfields;
	void *p;

	if (n < s->cap)
		return 0;
	cap = s->cap ? s->cap * 2 : 1024;
	p = realloc(s->key_off, cap * sizeof(*s->key_off));
	if (!p)
		return -ENOMEM;
	s->key_off = p;
	if (s->items) {
		p = realloc(s->items, cap * nf * sizeof(*s->items));
		if (!p)
			return -ENOMEM;
		s->items = p;
	}
	s->cap = cap;
	return 0;
}

/* Begin sample n with key (klen bytes of name), checking it is new. */
static int start_sample(struct scan *sc, const char *name, size_t klen,
			uint64_t hoff, struct diag *d)
{
	struct wds *s = sc->s;
	uint64_t n = s->count, *slot;
	int err;

	err = grow_samples(s);
	if (!err)
		err = hash_grow(sc, n + 1);
	if (err)
		return err;
	if (s->keys_len + klen + 1 > s->keys_cap) {
		size_t cap = s->keys_cap ? s->keys_cap : 65536;
		char *p;

		while (cap < s->keys_len + klen + 1)
			cap *= 2;
		p = realloc(s->keys, cap);
		if (!p)
			return -ENOMEM;
		s->keys = p;
		s->keys_cap = cap;
	}
	memcpy(s->keys + s->keys_len, name, klen);
	s->keys[s->keys_len + klen] = '\0';
	s->key_off[n] = s->keys_len;
	slot = hash_slot(sc, key_of(s, n));
	if (*slot)
		return diag_set(
			d, LOADER_EFORMAT,
			"%s: offset %" PRIu64
			": key \"%s\" appears again after other samples (the members of a sample must be consecutive)",
			s->name, hoff, key_of(s, n));
	*slot = n + 1;
	s->keys_len += klen + 1;
	sc->open = true;
	sc->nm = 0;
	sc->first_off = hoff;
	return 0;
}

/* Take one tar member into the scan. */
static int add_member(struct scan *sc, const struct tar_member *m,
		      struct diag *d)
{
	struct wds *s = sc->s;
	const char *base = strrchr(m->name, '/'), *dot;
	struct scan_member *sm;
	size_t klen, elen;
	int err;

	if (!tar_is_regular(m->type))
		return 0;
	base = base ? base + 1 : m->name;
	dot = strchr(base, '.');
	if (base[0] == '.' || !dot || !dot[1])
		return 0;
	klen = (size_t)(dot - m->name);
	elen = strlen(dot + 1);
	if (elen > WDS_EXT_MAX)
		return diag_set(
			d, LOADER_EFORMAT,
			"%s: offset %" PRIu64
			": member \"%s\": extension longer than %d characters",
			s->name, m->header_off, m->name, WDS_EXT_MAX);
	if (m->size > UINT32_MAX)
		return diag_set(
			d, LOADER_ETOOBIG,
			"%s: offset %" PRIu64 ": member \"%s\" has %" PRIu64
			" bytes (at most %" PRIu32 " fit a field)",
			s->name, m->header_off, m->name, m->size, UINT32_MAX);
	if (!sc->open || strlen(key_of(s, s->count)) != klen ||
	    memcmp(key_of(s, s->count), m->name, klen)) {
		err = finish_sample(sc, d);
		if (!err)
			err = start_sample(sc, m->name, klen, m->header_off, d);
		if (err)
			return err;
	}
	if (sc->nm == SCHEMA_MAX_FIELDS)
		return diag_set(d, LOADER_ESCHEMA,
				"%s: offset %" PRIu64
				": sample \"%s\" has more than %d members",
				s->name, m->header_off, key_of(s, s->count),
				SCHEMA_MAX_FIELDS);
	sm = &sc->m[sc->nm];
	for (size_t i = 0; i <= elen; i++) {
		char c = dot[1 + i];

		sm->ext[i] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
	}
	for (unsigned j = 0; j < sc->nm; j++)
		if (!strcmp(sc->m[j].ext, sm->ext))
			return diag_set(d, LOADER_EFORMAT,
					"%s: offset %" PRIu64
					": sample \"%s\" has two .%s members",
					s->name, m->header_off,
					key_of(s, s->count), sm->ext);
	err = intern_spell(s, dot + 1, &sm->spell);
	if (err == LOADER_ETOOBIG)
		return diag_set(d, err,
				"%s: offset %" PRIu64
				": more than %u different extensions",
				s->name, m->header_off, UINT16_MAX + 1u);
	if (err)
		return err;
	sm->off = m->data_off;
	sm->len = (uint32_t)m->size;
	sc->nm++;
	return 0;
}
/*
 * Decimal text, as WebDataset writes labels ("7\n"): surrounding white
 * space allowed, nothing else.
 */
int wds_parse_int(const unsigned char *p, size_t len, int64_t *v,
		  struct diag *d)
{
	char text[INT_TEXT_MAX + 1], *b = text, *e, *end;
	long long x;

	if (len > INT_TEXT_MAX)
		return diag_set(d, LOADER_EFORMAT,
				"%zu bytes is too long for a decimal integer",
				len);
	memcpy(text, p, len);
	text[len] = '\0';
	while (*b == ' ' || (*b >= '\t' && *b <= '\r'))
		b++;
	e = text + len;
	while (e > b && (e[-1] == ' ' || (e[-1] >= '\t' && e[-1] <= '\r')))
		e--;
	*e = '\0';
	end = b + (*b == '-' || *b == '+');
	if (!*end)
		goto bad;
	for (; *end; end++)
		if (*end < '0' || *end > '9')
			goto bad;
	errno = 0;
	x = strtoll(b, &end, 10);
	if (errno)
		goto bad;
	*v = x;
	return 0;
bad:
	/* Show the text only if it is printable; it came from the tar. */
	for (e = text; *e; e++)
		if (*e < ' ' || *e > '~')
			return diag_set(
				d, LOADER_EFORMAT,
				"not a decimal integer (%zu bytes of binary data)",
				len);
	return diag_set(d, LOADER_EFORMAT,
			"\"%s\" is not a decimal integer (or out of range)",
			text);
}

/* ---- the scan --------------------------------------------------------- */

int wds_scan(struct wds **out, int fd, const char *name, const char *ragged,
	     struct diag *d)
{
	struct scan sc = { 0 };
	struct tar_reader *t = NULL;
	struct tar_member m;
	struct wds *s;
	int err;

	*out = NULL;
	s = mem_calloc(1, sizeof(*s));
	if (!s)
		return diag_set(d, -ENOMEM, "%s: out of memory", name);
	s->fd = fd;
	s->name = mem_strdup(name);
	s->ragged = ragged ? mem_strdup(ragged) : NULL;
	if (!s->name || (ragged && !s->ragged)) {
		err = diag_set(d, -ENOMEM, "%s: out of memory", name);
		goto out;
	}
	err = tar_open(&t, fd, name, d);
	if (err)
		goto out;
	sc.s = s;
	while ((err = tar_next(t, &m, d)) > 0) {
		err = add_member(&sc, &m, d);
		if (err)
			goto out;
	}
	if (!err)
		err = finish_sample(&sc, d);
	if (!err && !s->count)
		err = diag_set(d, LOADER_EFORMAT,
			       "%s: no sample (no member with an extension)",
			       name);
out:
	free(sc.hash);
	tar_close(t);
	s->fd = -1;
	if (err == -ENOMEM && !d->msg[0])
		diag_set(d, err, "%s: out of memory", name);
	if (err) {
		wds_free(s);
		return err;
	}
	*out = s;
	return 0;
}

void wds_free(struct wds *w)
{
	if (!w)
		return;
	free(w->name);
	free(w->ragged);
	free(w->spell);
	free(w->keys);
	free(w->key_off);
	free(w->items);
	free(w);
}

const struct schema *wds_schema(const struct wds *w)
{
	return &w->schema;
}

uint64_t wds_count(const struct wds *w)
{
	return w->count;
}

enum rec_conv wds_conv(const struct wds *w, unsigned field)
{
	return (enum rec_conv)w->conv[field];
}

const char *wds_key(const struct wds *w, uint64_t i)
{
	return key_of(w, i);
}

const struct wds_item *wds_item(const struct wds *w, uint64_t i, unsigned k)
{
	return &w->items[i * w->schema.nfields + k];
}

void wds_where(const struct wds *w, uint64_t i, unsigned k, char *buf, size_t n)
{
	const struct wds_item *it = wds_item(w, i, k);

	snprintf(buf, n, "%s: member %s.%s at offset %" PRIu64, w->name,
		 key_of(w, i), w->spell[it->spell], it->off);
}

int wds_check_npy(const struct field *fl, const unsigned char *hdr, size_t len,
		  uint64_t member_len, struct npy_info *n, struct diag *d)
{
	uint64_t want[SCHEMA_MAX_DIMS];
	char got[128], first[128];
	bool same;
	int err = npy_parse(hdr, len, n, d);

	if (err)
		return err;
	same = !n->fortran && npy_dtype(n) == fl->dtype && n->ndim == fl->ndim;
	for (uint32_t i = 0; i < fl->ndim; i++) {
		/* A ragged field's first dimension is each sample's own. */
		want[i] = i == 0 && field_ragged(fl) ? n->dims[0] : fl->dims[i];
		same = same && n->dims[i] == want[i];
	}
	if (!same) {
		shape_text(n->dims, n->ndim, got, sizeof(got));
		shape_text(want, fl->ndim, first, sizeof(first));
		return diag_set(
			d, LOADER_ESCHEMA,
			"array %c%c%u%s %s differs from the first sample's %s %s (every sample's .npy must have one dtype and shape; one whose first dimension varies is packed with --ragged FIELD)",
			n->order, n->kind, n->itemsize,
			n->fortran ? " in Fortran order" : "", got,
			dtype_name(fl->dtype), first);
	}
	return npy_check_size(n, member_len, d);
}

/* ---- read in place ---------------------------------------------------- */

/* Sample i's field k into ent, its record starting at start. */
static int resolve(const struct wds *w, int fd, uint64_t i, unsigned k,
		   uint64_t start, struct field *f, bool auto_ragged,
		   uint64_t *ent, struct diag *d)
{
	const struct wds_item *it = wds_item(w, i, k);
	unsigned char buf[NPY_HEADER_MAX + 16];
	char where[300];
	struct npy_info n;
	int64_t v;
	size_t got;
	int err;

	switch (w->conv[k]) {
	case REC_INT_TEXT:
		if (it->len > INT_TEXT_MAX) {
			wds_where(w, i, k, where, sizeof(where));
			return diag_set(
				d, LOADER_EFORMAT,
				"%s: %" PRIu32
				" bytes, too long for a decimal integer",
				where, it->len);
		}
		err = fdio_pread_all(fd, buf, it->len, it->off);
		if (!err)
			err = wds_parse_int(buf, it->len, &v, d);
		if (err)
			break;
		memcpy(ent, &v, sizeof(v));
		return 0;
	case REC_NPY:
		got = it->len < sizeof(buf) ? it->len : sizeof(buf);
		err = fdio_pread_all(fd, buf, got, it->off);
		if (!err)
			err = wds_check_npy(f, buf, got, it->len, &n, d);
		if (err == LOADER_ESCHEMA && auto_ragged && !field_ragged(f) &&
		    f->ndim) {
			struct field r = *f;

			/* Only the first dimension differs: make it "*". */
			r.dims[0] = 0;
			if (!wds_check_npy(&r, buf, got, it->len, &n, d)) {
				*f = r;
				err = 0;
			}
		}
		if (!err && n.order == '>' && n.itemsize > 1)
			err = diag_set(
				d, -ENOTSUP,
				"a big-endian array cannot be read in place (loaderctl pack swaps it)");
		if (err)
			break;
		*ent = (it->off + n.data_off - start) |
		       (uint64_t)(it->len - n.data_off) << 32;
		return 0;
	default: *ent = (it->off - start) | (uint64_t)it->len << 32; return 0;
	}
	wds_where(w, i, k, where, sizeof(where));
	if (err == LOADER_ETRUNC)
		return diag_set(d, err,
				"%s: the tar file shrank since its scan",
				where);
	return diag_wrap(d, err, "%s", where);
}

/*
 * Make the index of the tar scanned into w (fd: the same file): reads
 * each sample's label texts and .npy headers with pread. A big-endian
 * .npy array cannot be read in place (it is refused: pack it, which
 * swaps it). With auto_ragged, a .npy field whose first dimension varies
 * becomes ragged ("[*,...]") instead of refused: a tar read in place has
 * no --ragged to say so.
 */
static int wds_index_build(struct recindex **out, const struct wds *w, int fd,
			   const char *name, bool auto_ragged, struct diag *d)
{
	uint32_t nf = w->schema.nfields;
	struct recindex *ix = recindex_new(w->count, nf);
	int err = 0;

	*out = NULL;
	if (!ix)
		return diag_set(d, -ENOMEM, "%s: index of %" PRIu64 " samples",
				name, w->count);
	ix->schema = w->schema;
	memcpy(ix->conv, w->conv, sizeof(ix->conv));
	for (uint64_t i = 0; i < w->count && !err; i++) {
		uint64_t start = UINT64_MAX, end = 0;

		for (unsigned k = 0; k < nf; k++) {
			const struct wds_item *it = wds_item(w, i, k);

			if (it->off < start)
				start = it->off;
			if (it->off + it->len > end)
				end = it->off + it->len;
		}
		if (end - start > SHARD_MAX_RECORD) {
			char where[300];

			wds_where(w, i, 0, where, sizeof(where));
			err = diag_set(
				d, LOADER_ETOOBIG,
				"%s: the sample spans %" PRIu64
				" bytes of the tar, more than a record may (%u)",
				where, end - start, (unsigned)SHARD_MAX_RECORD);
			break;
		}
		recindex_set(ix, i, start, (uint32_t)(end - start));
		for (unsigned k = 0; k < nf && !err; k++) {
			uint64_t *e = &ix->ent[i * nf + k];

			err = resolve(w, fd, i, k, start, &ix->schema.f[k],
				      auto_ragged, e, d);
			if (!err)
				ix->raw_bytes[k] += w->conv[k] == REC_INT_TEXT ?
							    8 :
							    *e >> 32;
		}
	}
	if (err) {
		recindex_free(ix);
		return err;
	}
	*out = ix;
	return 0;
}

int wds_index_scan(struct recindex **out, int fd, const char *name,
		   struct diag *d)
{
	struct wds *w = NULL;
	struct stat st;
	int err;

	*out = NULL;
	if (fstat(fd, &st))
		return diag_set(d, -errno, "%s: %s", name, strerror(errno));
	err = wds_scan(&w, fd, name, "*", d);
	if (!err)
		err = wds_index_build(out, w, fd, name, true, d);
	wds_free(w);
	if (!err)
		(*out)->file_size = (uint64_t)st.st_size;
	return err;
}

bool wds_is_tar(int fd, const char *name)
{
	unsigned char blk[TAR_BLOCK];
	size_t n = strlen(name);

	if (n > 4 && !strcmp(name + n - 4, ".tar"))
		return true;
	return !fdio_pread_all(fd, blk, sizeof(blk), 0) && tar_is_header(blk);
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int wds_list(const char *dir, char ***names, size_t *n, struct diag *d)
{
	DIR *dp = opendir(dir);
	struct dirent *e;
	size_t cap = 0;
	int err = 0;

	*names = NULL;
	*n = 0;
	if (!dp)
		return diag_set(d, -errno, "%s: %s", dir, strerror(errno));
	while ((e = readdir(dp)) && !err) {
		char **p;

		if (!dsfiles_tar_name(e->d_name))
			continue;
		if (*n == cap) {
			p = mem_realloc(*names,
					(cap ? cap * 2 : 64) * sizeof(*p));
			if (!p) {
				err = -ENOMEM;
				break;
			}
			*names = p;
			cap = cap ? cap * 2 : 64;
		}
		(*names)[*n] = mem_strdup(e->d_name);
		if (!(*names)[*n])
			err = -ENOMEM;
		else
			(*n)++;
	}
	closedir(dp);
	if (!err && !*n)
		err = diag_set(
			d, LOADER_EFORMAT,
			"%s: no manifest.json and no .tar files: not a dataset (loaderctl pack makes one; a directory of WebDataset .tar shards is read as it is)",
			dir);
	else if (err)
		diag_set(d, err, "%s: out of memory", dir);
	if (err) {
		for (size_t i = 0; i < *n; i++)
			free((*names)[i]);
		free(*names);
		*names = NULL;
		*n = 0;
		return err;
	}
	qsort(*names, *n, sizeof(**names), cmp_name);
	return 0;
}
