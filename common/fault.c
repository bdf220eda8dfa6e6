/*
 * fault.c - the injected failures of fault.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fault.h"

#define FAULT_MAX_READ	 16
#define FAULT_SHORT_UNIT 4096

int fault_armed;

enum read_kind { READ_EIO, READ_SHORT };

struct read_fault {
	enum read_kind kind;
	uint64_t ino;
	uint64_t off; /* UINT64_MAX: any read of the file */
};

static struct read_fault reads[FAULT_MAX_READ];
static unsigned nreads;
static bool alloc_open;

/* Counted with atomics: the open's work runs on more than one thread. */
static uint64_t open_seq;
static uint64_t open_point;
static int open_active, open_failed;

static int parse_u64(const char *s, const char **end, uint64_t *v)
{
	char *e;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	*v = strtoull(s, &e, 10);
	if (errno)
		return -EINVAL;
	*end = e;
	return 0;
}

static int parse_item(const char *item, size_t len, struct diag *d)
{
	static const char eio[] = "read-eio=", shrt[] = "read-short=";
	struct read_fault f = { .off = UINT64_MAX };
	const char *p, *end = item + len;

	if (len == strlen("alloc-open") && !memcmp(item, "alloc-open", len)) {
		alloc_open = true;
		return 0;
	}
	if (len > sizeof(eio) - 1 && !memcmp(item, eio, sizeof(eio) - 1)) {
		f.kind = READ_EIO;
		p = item + sizeof(eio) - 1;
	} else if (len > sizeof(shrt) - 1 &&
		   !memcmp(item, shrt, sizeof(shrt) - 1)) {
		f.kind = READ_SHORT;
		p = item + sizeof(shrt) - 1;
	} else {
		goto bad;
	}
	if (parse_u64(p, &p, &f.ino))
		goto bad;
	if (p < end && *p == '@' && f.kind == READ_EIO &&
	    parse_u64(p + 1, &p, &f.off))
		goto bad;
	if (p != end)
		goto bad;
	if (nreads == FAULT_MAX_READ)
		return diag_set(d, -EINVAL, "more than %d read faults",
				FAULT_MAX_READ);
	reads[nreads++] = f;
	return 0;
bad:
	return diag_set(
		d, -EINVAL,
		"'%.*s': not read-eio=INO[@OFF], read-short=INO or alloc-open",
		(int)len, item);
}

int fault_setup(const char *spec, struct diag *d)
{
	const char *p = spec;

	if (!spec || !*spec)
		return 0;
	while (*p) {
		size_t n = strcspn(p, ",");
		int err = parse_item(p, n, d);

		if (err)
			return err;
		p += n;
		if (*p == ',')
			p++;
	}
	fault_armed = 1;
	return 0;
}

int64_t fault_read_slow(int fd, uint64_t off, uint64_t len)
{
	struct stat st;

	if (!nreads || fstat(fd, &st))
		return 0;
	for (unsigned i = 0; i < nreads; i++) {
		const struct read_fault *f = &reads[i];
		uint64_t half;

		if ((uint64_t)st.st_ino != f->ino)
			continue;
		if (f->kind == READ_EIO) {
			if (f->off == UINT64_MAX ||
			    (f->off >= off && f->off - off < len))
				return -EIO;
			continue;
		}
		half = len / 2 / FAULT_SHORT_UNIT * FAULT_SHORT_UNIT;
		if (half < FAULT_SHORT_UNIT)
			half = FAULT_SHORT_UNIT;
		if (half < len)
			return (int64_t)half;
	}
	return 0;
}

void fault_open_begin(void)
{
	if (!alloc_open)
		return;
	__atomic_add_fetch(&open_seq, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&open_point, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&open_failed, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&open_active, 1, __ATOMIC_SEQ_CST);
}

enum fault_open fault_open_end(void)
{
	if (!alloc_open)
		return FAULT_OPEN_UNARMED;
	__atomic_store_n(&open_active, 0, __ATOMIC_SEQ_CST);
	return __atomic_load_n(&open_failed, __ATOMIC_SEQ_CST) ?
		       FAULT_OPEN_FAILED :
		       FAULT_OPEN_PASSED;
}

bool fault_alloc_slow(void)
{
	uint64_t k;

	if (!alloc_open || !__atomic_load_n(&open_active, __ATOMIC_SEQ_CST))
		return false;
	k = __atomic_add_fetch(&open_point, 1, __ATOMIC_SEQ_CST);
	if (k != __atomic_load_n(&open_seq, __ATOMIC_SEQ_CST))
		return false;
	__atomic_store_n(&open_failed, 1, __ATOMIC_SEQ_CST);
	return true;
}

/* An allocation failed on purpose: errno as malloc would leave it. */
static bool refused(void)
{
	if (!fault_alloc())
		return false;
	errno = ENOMEM;
	return true;
}

void *mem_alloc(size_t n)
{
	if (refused())
		return NULL;
	return malloc(n);
}

void *mem_calloc(size_t n, size_t size)
{
	if (refused())
		return NULL;
	return calloc(n, size);
}

void *mem_realloc(void *p, size_t n)
{
	if (refused())
		return NULL;
	return realloc(p, n);
}

char *mem_strdup(const char *s)
{
	if (refused())
		return NULL;
	return strdup(s);
}

void *mem_aligned(size_t align, size_t n)
{
	void *p;

	if (refused())
		return NULL;
	if (posix_memalign(&p, align, n))
		return NULL;
	return p;
}
