/*
 * s3.c - requests to an S3-API object store through libcurl.
 *
 * Every operation, even a single HEAD, is a set of requests run by
 * run() on the client's one curl multi handle: the multi handle owns the
 * connection cache, so a connection made for one request is kept alive
 * for the next, whichever operation makes it. A request that fails in a
 * way a later attempt may not (see retryable()) goes back to the queue
 * with a due time; run() polls with a timeout that wakes it for the
 * earliest one. The easy handle is reused for the retry: removed from
 * the multi handle and added again, it starts over.
 *
 * Signing is libcurl's (CURLOPT_AWS_SIGV4). libcurl 7.88 neither sorts
 * query parameters nor signs one without a value correctly (curl issues
 * 8107 and 9717), so every query here is written sorted and with "=".
 * It hashes the payload only when no x-amz-content-sha256 header is
 * given; we always give UNSIGNED-PAYLOAD, and protect bodies we send
 * with Content-MD5 instead, which the store checks.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "clock.h"
#include "fdio.h"
#include "loader_error.h"
#include "rng.h"
#include "s3.h"

#define S3_PARALLEL_MAX 64
#define S3_URL_MAX	(AWS_ENDPOINT_MAX + AWS_BUCKET_MAX + 3 * S3_KEY_MAX + 160)
#define S3_ERRBODY	1024
#define S3_MIN_PART	(5u << 20) /* S3's least part, but for the last */
#define S3_MAX_PARTS	10000

/*
 * A body written into a file goes in pieces of this many bytes (struct
 * req's stage): libcurl hands it over 16 KiB at a time, and writing
 * 204 MB into a new file here took 0.08 s in 16 KiB writes against
 * 0.04 s in 64 KiB ones (dd). Not larger: a stage above malloc's mmap
 * threshold is new pages for every request, and 1 MiB ones made a cold
 * JPEG epoch's fetch take 0.9-1.4 s instead of 0.4.
 */
#define S3_STAGE (64u << 10)

/* Connections whose sockets are known (s3.socks); more go untracked. */
#define S3_SOCKS (2 * S3_PARALLEL_MAX)

struct s3 {
	struct aws_cfg cfg;
	char bucket[AWS_BUCKET_MAX];
	char base[AWS_ENDPOINT_MAX + AWS_BUCKET_MAX + 2]; /* up to the key */
	char sigv4[AWS_REGION_MAX + 16];
	char userpwd_set;
	struct s3_params p;
	CURLM *multi;
	struct s3_counts n;
	struct rng rng; /* the backoffs' jitter */
	/*
	 * The sockets of libcurl's connections, and each one's local port
	 * once asked (0 before): how a request finds its connection's
	 * socket (on_prereq()) to acknowledge a response's headers at once
	 * (on_header()).
	 */
	struct {
		curl_socket_t fd;
		int port;
	} socks[S3_SOCKS];
	unsigned nsocks;
};

/* One HTTP request, and everything needed to run it again. */
struct req {
	const char *method; /* GET HEAD PUT POST DELETE */
	const char *key;    /* for messages */
	char url[S3_URL_MAX];
	char range[64];
	char if_match[S3_ETAG_MAX + 16];
	char md5[32]; /* base64 of the body's MD5, or "" */
	/* The body sent: in_mem, or in_len bytes of in_fd from in_off. */
	const char *in_mem;
	int in_fd;
	uint64_t in_off, in_len, in_pos;
	/*
	 * The body received: into out_fd from out_off, into mem when
	 * to_mem, or into the caller's buf; buf_cap bytes at most for a
	 * ranged GET (0: no bound).
	 */
	bool to_mem;
	int out_fd;
	uint64_t out_off;
	unsigned char *buf;
	uint64_t buf_cap;
	/* Told of each part of the body written into out_fd (s3.h). */
	void (*progress)(void *arg, uint64_t end);
	void (*data)(void *arg, uint64_t off, const void *buf, size_t len);
	void *progress_arg;
	uint64_t max; /* 0: no bound */
	char *mem;
	size_t mem_cap;
	uint64_t got;
	/* The last staged of the got bytes, not yet written into out_fd. */
	unsigned char *stage;
	size_t staged;
	/* The response. */
	long status;
	struct s3_obj obj;
	bool have_len;
	uint64_t content_len;
	char errbody[S3_ERRBODY];
	size_t errlen;
	/* The run. */
	struct s3 *s3;
	curl_socket_t sock; /* its connection's, or CURL_SOCKET_BAD */
	CURL *e;
	struct curl_slist *hdrs;
	unsigned attempt;
	uint64_t due_ms;
	bool active, done;
	int err;
	char why[DIAG_MAX];
};

/* ---- memory that is wiped when it is given back ------------------------ */

/*
 * libcurl copies a client's credentials where we cannot reach them: the
 * user name and password into its easy handle and into each connection
 * it keeps, the session token's header into the request it sends, and
 * "AWS4" and the secret key into the buffers it signs with. Freed as
 * they are, those copies stay in the heap until the memory is used
 * again. libcurl and OpenSSL take their allocator from us
 * (curl_global_init_mem(), CRYPTO_set_mem_functions()), and these give
 * every block back zeroed: wholly, as malloc_usable_size() says, since
 * a string may have been longer in a block's earlier use. A realloc()
 * that moves a block copies it and wipes the old one, which glibc's
 * would free as it is. The cost, a memset of what libcurl frees (its
 * receive buffer once a request), is small beside the request.
 */
static void wipe_free(void *p)
{
	if (!p)
		return;
	explicit_bzero(p, malloc_usable_size(p));
	free(p);
}

static void *wipe_realloc(void *p, size_t n)
{
	size_t have;
	void *q;

	if (!p)
		return malloc(n);
	if (!n) {
		wipe_free(p);
		return NULL;
	}
	have = malloc_usable_size(p);
	if (n <= have)
		return p;
	q = malloc(n);
	if (!q)
		return NULL;
	memcpy(q, p, have);
	wipe_free(p);
	return q;
}

static char *wipe_strdup(const char *str)
{
	size_t n = strlen(str) + 1;
	char *p = malloc(n);

	if (p)
		memcpy(p, str, n);
	return p;
}

static void *crypto_malloc(size_t n, const char *file, int line)
{
	(void)file;
	(void)line;
	return malloc(n);
}

static void *crypto_realloc(void *p, size_t n, const char *file, int line)
{
	(void)file;
	(void)line;
	return wipe_realloc(p, n);
}

static void crypto_free(void *p, const char *file, int line)
{
	(void)file;
	(void)line;
	wipe_free(p);
}

int s3_global_init(void)
{
	/*
	 * OpenSSL takes an allocator only before its first allocation.
	 * Where something has made one already (not so in loaderd, which
	 * calls this first), its TLS buffers are freed unwiped; libcurl's
	 * own copies, all of them over plain HTTP, still are wiped.
	 */
	(void)CRYPTO_set_mem_functions(crypto_malloc, crypto_realloc,
				       crypto_free);
	return curl_global_init_mem(CURL_GLOBAL_DEFAULT, malloc, wipe_free,
				    wipe_realloc, wipe_strdup, calloc) ?
		       -ENOMEM :
		       0;
}

/* ---- URLs -------------------------------------------------------------- */

/* Percent-encode key, keeping '/' and RFC 3986's unreserved bytes. */
static int encode_key(char *out, size_t cap, const char *key)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (const unsigned char *k = (const unsigned char *)key; *k; k++) {
		bool keep = isalnum(*k) || *k == '-' || *k == '.' ||
			    *k == '_' || *k == '~' || *k == '/';

		if (o + (keep ? 1 : 3) >= cap)
			return -ENAMETOOLONG;
		if (keep) {
			out[o++] = (char)*k;
		} else {
			out[o++] = '%';
			out[o++] = hex[*k >> 4];
			out[o++] = hex[*k & 15];
		}
	}
	out[o] = '\0';
	return 0;
}

static int req_url(struct s3 *s, struct req *r, const char *key,
		   const char *query, struct diag *d)
{
	char enc[3 * S3_KEY_MAX + 1];
	int n;

	if (strlen(key) >= S3_KEY_MAX || encode_key(enc, sizeof(enc), key))
		return diag_set(d, LOADER_EUSAGE,
				"s3://%s/%.64s...: key longer than %d bytes",
				s->bucket, key, S3_KEY_MAX - 1);
	n = snprintf(r->url, sizeof(r->url), "%s/%s%s%s", s->base, enc,
		     query ? "?" : "", query ? query : "");
	if (n < 0 || (size_t)n >= sizeof(r->url))
		return diag_set(d, LOADER_EUSAGE, "s3://%s/%s: URL too long",
				s->bucket, key);
	r->key = key;
	return 0;
}

int s3_new(struct s3 **out, const struct aws_cfg *cfg, const char *bucket,
	   const struct s3_params *p, struct diag *d)
{
	struct s3 *s;
	const char *host;
	int n;

	*out = NULL;
	if (!bucket[0] || strlen(bucket) >= AWS_BUCKET_MAX)
		return diag_set(d, LOADER_EUSAGE, "bucket \"%s\": not a name",
				bucket);
	host = strstr(cfg->endpoint, "://");
	if (!host)
		return diag_set(d, LOADER_EUSAGE,
				"endpoint \"%s\": no scheme:// before the host",
				cfg->endpoint);
	host += 3;
	s = calloc(1, sizeof(*s));
	if (!s)
		return diag_set(d, -ENOMEM, "out of memory");
	s->cfg = *cfg;
	snprintf(s->bucket, sizeof(s->bucket), "%s", bucket);
	if (aws_virtual_host(cfg, bucket))
		n = snprintf(s->base, sizeof(s->base), "%.*s%s.%s",
			     (int)(host - cfg->endpoint), cfg->endpoint, bucket,
			     host);
	else
		n = snprintf(s->base, sizeof(s->base), "%s/%s", cfg->endpoint,
			     bucket);
	if (n < 0 || (size_t)n >= sizeof(s->base)) {
		s3_free(s);
		return diag_set(d, LOADER_EUSAGE, "endpoint \"%s\": too long",
				cfg->endpoint);
	}
	snprintf(s->sigv4, sizeof(s->sigv4), "aws:amz:%s:s3", cfg->region);
	if (p)
		s->p = *p;
	if (!s->p.tries)
		s->p.tries = 6;
	if (!s->p.backoff_ms)
		s->p.backoff_ms = 100;
	if (!s->p.backoff_max_ms)
		s->p.backoff_max_ms = 5000;
	if (!s->p.connect_s)
		s->p.connect_s = 10;
	if (!s->p.stall_s)
		s->p.stall_s = 30;
	if (!s->p.parallel)
		s->p.parallel = 8;
	if (s->p.parallel > S3_PARALLEL_MAX)
		s->p.parallel = S3_PARALLEL_MAX;
	if (!s->p.part_bytes)
		s->p.part_bytes = 64u << 20;
	if (s->p.part_bytes < S3_MIN_PART)
		s->p.part_bytes = S3_MIN_PART;
	rng_seed(&s->rng,
		 clock_mono_ns() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)s);
	s->multi = curl_multi_init();
	if (!s->multi) {
		s3_free(s);
		return diag_set(d, -ENOMEM, "out of memory (curl multi)");
	}
	curl_multi_setopt(s->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
			  (long)s->p.parallel);
	*out = s;
	return 0;
}

void s3_free(struct s3 *s)
{
	if (!s)
		return;
	if (s->multi)
		curl_multi_cleanup(s->multi);
	aws_cfg_wipe(&s->cfg);
	free(s);
}

void s3_set_cancel(struct s3 *s, const bool *cancel)
{
	s->p.cancel = cancel;
}

struct s3_counts s3_counts(const struct s3 *s)
{
	return s->n;
}

/* ---- callbacks --------------------------------------------------------- */

/* Header value after "Name:", trimmed, if line is that header. */
static bool header_is(const char *line, size_t len, const char *name,
		      const char **val, size_t *vlen)
{
	size_t nl = strlen(name);

	if (len <= nl || strncasecmp(line, name, nl) || line[nl] != ':')
		return false;
	line += nl + 1;
	len -= nl + 1;
	while (len && (*line == ' ' || *line == '\t'))
		line++, len--;
	while (len && isspace((unsigned char)line[len - 1]))
		len--;
	*val = line;
	*vlen = len;
	return true;
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *arg)
{
	struct req *r = arg;
	size_t len = size * nitems;
	const char *v;
	size_t vl;

	/*
	 * The headers' end. A gateway that sends a small body apart from
	 * its headers and with Nagle's algorithm on (Ceph's beast without
	 * tcp_nodelay=1) holds the body until they are acknowledged, and
	 * Linux delays that acknowledgement on a kept-alive connection by
	 * up to 40 ms: a 1,000-byte ranged GET took 44 ms, against 2 ms
	 * with the acknowledgement sent now. TCP_QUICKACK sends it.
	 */
	if ((len == 2 && buf[0] == '\r') || (len == 1 && buf[0] == '\n')) {
		if (r->sock != CURL_SOCKET_BAD)
			(void)setsockopt(r->sock, IPPROTO_TCP, TCP_QUICKACK,
					 &(int){ 1 }, sizeof(int));
		return len;
	}
	/* A new response (after a 100 Continue, say) starts afresh. */
	if (len > 5 && !strncmp(buf, "HTTP/", 5)) {
		r->have_len = false;
		r->obj.etag[0] = '\0';
		r->obj.size = 0;
		return len;
	}
	if (header_is(buf, len, "ETag", &v, &vl)) {
		if (vl >= sizeof(r->obj.etag))
			vl = sizeof(r->obj.etag) - 1;
		memcpy(r->obj.etag, v, vl);
		r->obj.etag[vl] = '\0';
	} else if (header_is(buf, len, "Content-Length", &v, &vl)) {
		r->content_len = strtoull(v, NULL, 10);
		r->have_len = true;
		if (!r->range[0])
			r->obj.size = r->content_len;
	} else if (header_is(buf, len, "Content-Range", &v, &vl)) {
		const char *slash = memchr(v, '/', vl);

		if (slash)
			r->obj.size = strtoull(slash + 1, NULL, 10);
	}
	return len;
}

static int body_pwrite(struct req *r, const void *buf, size_t len, uint64_t off)
{
	int err = fdio_pwrite_all(r->out_fd, buf, len, off);

	if (err) {
		r->err = err;
		snprintf(r->why, sizeof(r->why), "writing the local copy: %s",
			 strerror(-err));
	}
	return err;
}

/* Write what is staged: it ends at the got bytes. */
static int body_flush(struct req *r)
{
	if (!r->staged)
		return 0;
	if (body_pwrite(r, r->stage, r->staged,
			r->out_off + r->got - r->staged))
		return -1;
	r->staged = 0;
	return 0;
}

/*
 * The len bytes of the body after the got received, into out_fd: staged
 * until S3_STAGE bytes are, then written at once.
 */
static int body_write(struct req *r, const char *buf, size_t len)
{
	if (!r->stage) {
		r->stage = malloc(S3_STAGE);
		if (!r->stage)
			return body_pwrite(r, buf, len, r->out_off + r->got);
	}
	if (r->staged + len > S3_STAGE && body_flush(r))
		return -1;
	if (len >= S3_STAGE)
		return body_pwrite(r, buf, len, r->out_off + r->got);
	memcpy(r->stage + r->staged, buf, len);
	r->staged += len;
	return 0;
}

/*
 * Bytes of the version asked for (If-Match made the store check it;
 * one that did not is not believed) are there to read in out_fd.
 */
static void body_progress(struct req *r)
{
	if (r->progress &&
	    (!r->if_match[0] || !strcmp(r->if_match, r->obj.etag)))
		r->progress(r->progress_arg, r->out_off + r->got - r->staged);
}

static size_t on_body(char *buf, size_t size, size_t nitems, void *arg)
{
	struct req *r = arg;
	size_t len = size * nitems;

	curl_easy_getinfo(r->e, CURLINFO_RESPONSE_CODE, &r->status);
	if (r->status < 200 || r->status > 299) {
		/* An error's body: its <Code> and <Message> say why. */
		size_t room = sizeof(r->errbody) - 1 - r->errlen;

		if (len < room)
			room = len;
		memcpy(r->errbody + r->errlen, buf, room);
		r->errlen += room;
		r->errbody[r->errlen] = '\0';
		return len;
	}
	if (r->max && r->got + len > r->max) {
		r->err = LOADER_ETOOBIG;
		snprintf(r->why, sizeof(r->why),
			 "larger than the %" PRIu64 " bytes allowed", r->max);
		return 0;
	}
	if (r->buf_cap && r->got + len > r->buf_cap) {
		r->err = -EIO;
		if (r->status == 200)
			snprintf(r->why, sizeof(r->why),
				 "the store sent the whole object for a range");
		else
			snprintf(r->why, sizeof(r->why),
				 "more than the %" PRIu64
				 " bytes of the range asked for came",
				 r->buf_cap);
		return 0;
	}
	if (r->buf) {
		memcpy(r->buf + r->got, buf, len);
	} else if (r->to_mem) {
		if (r->got + len + 1 > r->mem_cap) {
			size_t cap = r->mem_cap ? r->mem_cap * 2 : 65536;
			char *m;

			while (cap < r->got + len + 1)
				cap *= 2;
			m = realloc(r->mem, cap);
			if (!m) {
				r->err = -ENOMEM;
				snprintf(r->why, sizeof(r->why),
					 "out of memory");
				return 0;
			}
			r->mem = m;
			r->mem_cap = cap;
		}
		memcpy(r->mem + r->got, buf, len);
		/* The XML replies are searched as strings (xml_text()). */
		r->mem[r->got + len] = '\0';
	} else {
		size_t staged = r->staged;

		if (r->data)
			r->data(r->progress_arg, r->out_off + r->got, buf, len);
		if (body_write(r, buf, len))
			return 0;
		r->got += len;
		/* Staged whole: no byte more in out_fd than before. */
		if (r->staged != staged + len)
			body_progress(r);
		return len;
	}
	r->got += len;
	return len;
}

static size_t on_read(char *buf, size_t size, size_t nitems, void *arg)
{
	struct req *r = arg;
	size_t len = size * nitems;
	ssize_t n;

	if (len > r->in_len - r->in_pos)
		len = (size_t)(r->in_len - r->in_pos);
	if (!len)
		return 0;
	if (r->in_mem) {
		memcpy(buf, r->in_mem + r->in_pos, len);
		n = (ssize_t)len;
	} else {
		do
			n = pread(r->in_fd, buf, len,
				  (off_t)(r->in_off + r->in_pos));
		while (n < 0 && errno == EINTR);
		if (n <= 0) {
			r->err = n < 0 ? -errno : LOADER_ETRUNC;
			snprintf(r->why, sizeof(r->why),
				 "reading the local file: %s",
				 n < 0 ? strerror(errno) :
					 "it ends before its size");
			return CURL_READFUNC_ABORT;
		}
	}
	r->in_pos += (uint64_t)n;
	return (size_t)n;
}

static int on_seek(void *arg, curl_off_t off, int origin)
{
	struct req *r = arg;

	if (origin != SEEK_SET || off < 0 || (uint64_t)off > r->in_len)
		return CURL_SEEKFUNC_CANTSEEK;
	r->in_pos = (uint64_t)off;
	return CURL_SEEKFUNC_OK;
}

/* ---- running requests -------------------------------------------------- */

/* libcurl opened a socket for a connection: remember it. */
static int on_sockopt(void *arg, curl_socket_t fd, curlsocktype purpose)
{
	struct s3 *s = arg;

	if (purpose == CURLSOCKTYPE_IPCXN && s->nsocks < S3_SOCKS) {
		s->socks[s->nsocks].fd = fd;
		s->socks[s->nsocks].port = 0;
		s->nsocks++;
	}
	return CURL_SOCKOPT_OK;
}

/* libcurl is done with a connection: close its socket, forget it. */
static int on_closesocket(void *arg, curl_socket_t fd)
{
	struct s3 *s = arg;

	for (unsigned i = 0; i < s->nsocks; i++)
		if (s->socks[i].fd == fd) {
			s->socks[i] = s->socks[--s->nsocks];
			break;
		}
	return close(fd);
}

static int local_port(curl_socket_t fd)
{
	struct sockaddr_storage a;
	socklen_t n = sizeof(a);

	if (getsockname(fd, (struct sockaddr *)&a, &n))
		return -1;
	if (a.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&a)->sin_port);
	if (a.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&a)->sin6_port);
	return -1;
}

/*
 * The request's connection is made (or taken from the pool): find its
 * socket by the local port libcurl reports.
 */
static int on_prereq(void *arg, char *ip, char *local_ip, int port, int lport)
{
	struct req *r = arg;
	struct s3 *s = r->s3;

	(void)ip;
	(void)local_ip;
	(void)port;
	r->sock = CURL_SOCKET_BAD;
	for (unsigned i = 0; i < s->nsocks; i++) {
		if (!s->socks[i].port)
			s->socks[i].port = local_port(s->socks[i].fd);
		if (s->socks[i].port == lport) {
			r->sock = s->socks[i].fd;
			break;
		}
	}
	return CURL_PREREQFUNC_OK;
}

/*
 * A request's headers, one of them the session token's: wiped before
 * they are freed (libcurl's free would wipe them too, but they are
 * ours to wipe).
 */
static void hdrs_free(struct curl_slist *l)
{
	for (struct curl_slist *t = l; t; t = t->next)
		explicit_bzero(t->data, strlen(t->data));
	curl_slist_free_all(l);
}

static int req_setup(struct s3 *s, struct req *r, struct diag *d)
{
	char h[AWS_TOKEN_MAX + 64];
	struct curl_slist *l = NULL, *t;
	CURL *e = curl_easy_init();

	if (!e)
		return diag_set(d, -ENOMEM, "out of memory (curl)");
	r->e = e;
	r->s3 = s;
	r->sock = CURL_SOCKET_BAD;
#define ADD(str)                                                               \
	do {                                                                   \
		t = curl_slist_append(l, (str));                               \
		if (!t)                                                        \
			goto nomem;                                            \
		l = t;                                                         \
	} while (0)
	/*
	 * Only headers that go out: libcurl signs every one in the list,
	 * so an "Expect:" that removes a header would be signed unsent.
	 */
	ADD("x-amz-content-sha256: UNSIGNED-PAYLOAD");
	if (s->cfg.session_token[0]) {
		snprintf(h, sizeof(h), "x-amz-security-token: %s",
			 s->cfg.session_token);
		ADD(h);
		explicit_bzero(h, sizeof(h));
	}
	if (r->range[0]) {
		snprintf(h, sizeof(h), "Range: %s", r->range);
		ADD(h);
	}
	if (r->if_match[0]) {
		snprintf(h, sizeof(h), "If-Match: %s", r->if_match);
		ADD(h);
	}
	if (r->md5[0]) {
		snprintf(h, sizeof(h), "Content-MD5: %s", r->md5);
		ADD(h);
	}
#undef ADD
	r->hdrs = l;
	curl_easy_setopt(e, CURLOPT_URL, r->url);
	curl_easy_setopt(e, CURLOPT_PRIVATE, r);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, l);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, (long)s->p.connect_s);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1024L);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)s->p.stall_s);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, on_sockopt);
	curl_easy_setopt(e, CURLOPT_SOCKOPTDATA, s);
	curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, on_closesocket);
	curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, s);
	curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, on_prereq);
	curl_easy_setopt(e, CURLOPT_PREREQDATA, r);
	if (s->cfg.access_key[0]) {
		curl_easy_setopt(e, CURLOPT_AWS_SIGV4, s->sigv4);
		curl_easy_setopt(e, CURLOPT_USERNAME, s->cfg.access_key);
		curl_easy_setopt(e, CURLOPT_PASSWORD, s->cfg.secret_key);
	}
	if (!strcmp(r->method, "HEAD")) {
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	} else if (!strcmp(r->method, "PUT") || !strcmp(r->method, "POST")) {
		if (!strcmp(r->method, "PUT")) {
			curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
			curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE,
					 (curl_off_t)r->in_len);
		} else {
			curl_easy_setopt(e, CURLOPT_POST, 1L);
			curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
					 (curl_off_t)r->in_len);
		}
		curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(e, CURLOPT_READDATA, r);
		curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, on_seek);
		curl_easy_setopt(e, CURLOPT_SEEKDATA, r);
	} else if (strcmp(r->method, "GET")) {
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
	} else if (r->out_fd >= 0 && !r->buf && !r->to_mem) {
		curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 512L * 1024);
	}
	return 0;
nomem:
	explicit_bzero(h, sizeof(h));
	hdrs_free(l);
	return diag_set(d, -ENOMEM, "out of memory (curl headers)");
}

static void req_clean(struct req *r)
{
	if (r->e)
		curl_easy_cleanup(r->e);
	r->e = NULL;
	hdrs_free(r->hdrs);
	r->hdrs = NULL;
	free(r->stage);
	r->stage = NULL;
	r->staged = 0;
}

/* The store's <Code> in an error body, or "". */
static void err_code(const struct req *r, char *out, size_t cap)
{
	const char *a = strstr(r->errbody, "<Code>"), *b;

	out[0] = '\0';
	if (!a)
		return;
	a += 6;
	b = strstr(a, "</Code>");
	if (b && (size_t)(b - a) < cap) {
		memcpy(out, a, (size_t)(b - a));
		out[b - a] = '\0';
	}
}

static bool retryable(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_COULDNT_RESOLVE_HOST: return true;
	default: return false;
	}
}

/*
 * A request's attempt ended with rc. Either it is done (r->done, with
 * r->err) or it is due again after a backoff.
 */
static void req_ended(struct s3 *s, struct req *r, CURLcode rc)
{
	char code[64];
	bool again = false;

	s->n.bytes_in += r->got;
	curl_easy_getinfo(r->e, CURLINFO_RESPONSE_CODE, &r->status);
	if (!r->err && rc == CURLE_OK && r->staged && !body_flush(r))
		body_progress(r);
	if (r->err) {
		/* Ours (a bound, a local write): no retry changes it. */
	} else if (rc != CURLE_OK) {
		again = retryable(rc);
		r->err = -EIO;
		snprintf(r->why, sizeof(r->why), "%s", curl_easy_strerror(rc));
	} else if (r->status >= 200 && r->status <= 299) {
		if (r->have_len && strcmp(r->method, "HEAD") &&
		    r->got != r->content_len) {
			again = true;
			r->err = -EIO;
			snprintf(r->why, sizeof(r->why),
				 "short body: %" PRIu64 " of %" PRIu64 " bytes",
				 r->got, r->content_len);
		}
	} else {
		err_code(r, code, sizeof(code));
		switch (r->status) {
		case 403: r->err = -EACCES; break;
		case 404: r->err = -ENOENT; break;
		case 412: r->err = -ESTALE; break;
		case 429:
		case 500:
		case 502:
		case 503:
		case 504:
			again = true;
			/* fall through */
		default: r->err = -EIO; break;
		}
		snprintf(r->why, sizeof(r->why), "HTTP %ld%s%s%s", r->status,
			 code[0] ? " (" : "", code, code[0] ? ")" : "");
		if (r->status == 412)
			snprintf(
				r->why, sizeof(r->why),
				"HTTP 412: the object changed (its ETag is no longer %s)",
				r->if_match);
	}
	if (again && r->attempt + 1 < s->p.tries) {
		uint64_t cap = (uint64_t)s->p.backoff_ms << r->attempt;

		if (cap > s->p.backoff_max_ms)
			cap = s->p.backoff_max_ms;
		r->attempt++;
		s->n.retries++;
		r->due_ms = clock_mono_ms() + rng_below(&s->rng, cap + 1);
		r->err = 0;
		return;
	}
	if (again) {
		char last[DIAG_MAX - 64];

		snprintf(last, sizeof(last), "%s", r->why);
		snprintf(r->why, sizeof(r->why), "%s, after %u tries", last,
			 r->attempt + 1);
	}
	r->done = true;
}

/* Reset what an attempt received, for the next one. */
static void req_rewind(struct req *r)
{
	r->got = 0;
	r->staged = 0;
	r->in_pos = 0;
	r->errlen = 0;
	r->errbody[0] = '\0';
	r->status = 0;
	r->have_len = false;
	r->content_len = 0;
	memset(&r->obj, 0, sizeof(r->obj));
	r->why[0] = '\0';
}

/*
 * Where a run takes its requests from: next() hands out the next one
 * (NULL: none now; it is asked again as slots free), and ended() (may
 * be NULL) is told of each one done. A request is set up when taken.
 */
struct feed {
	struct req *(*next)(void *arg);
	void (*ended)(void *arg, struct req *r);
	void *arg;
};

/*
 * Run the requests feed hands out to their end, at most the client's
 * parallel count at once, taking the next as soon as one ends. Returns
 * 0 (each request's outcome is in its err and why), or a code of the
 * run itself (cancelled, out of memory, curl's multi failing); then
 * the requests still held are cleaned up, unended.
 */
static int run_fed(struct s3 *s, const struct feed *fd, struct diag *d)
{
	struct req *held[S3_PARALLEL_MAX];
	size_t nheld = 0, active = 0;
	bool ended;
	int err = 0;

	for (;;) {
		uint64_t now = clock_mono_ms(), next = UINT64_MAX;
		int still, msgs, wait_ms;
		CURLMsg *m;

		if (s->p.cancel &&
		    __atomic_load_n(s->p.cancel, __ATOMIC_RELAXED)) {
			err = diag_set(d, -ECANCELED, "s3://%s/%s: cancelled",
				       s->bucket,
				       nheld && held[0]->key ? held[0]->key :
							       "");
			goto out;
		}
		/*
		 * The caller's deadline bounds the whole operation: connects,
		 * stalls, retries and their backoffs together. Each request's
		 * own bounds (connect_s, stall_s, tries) would let a store that
		 * accepts and never answers hold it for minutes.
		 */
		if (s->p.deadline_ms && now >= s->p.deadline_ms) {
			const struct req *r = nheld ? held[0] : NULL;

			err = diag_set(
				d, -ETIMEDOUT,
				"s3://%s/%s: %s not done by the deadline (try %u%s%s)",
				s->bucket, r && r->key ? r->key : "",
				r ? r->method : "request",
				r ? r->attempt + 1 : 0,
				r && r->why[0] ? "; last: " : "",
				r && r->why[0] ? r->why : "");
			goto out;
		}
		while (nheld < s->p.parallel) {
			struct req *r = fd->next(fd->arg);

			if (!r)
				break;
			err = req_setup(s, r, d);
			if (err) {
				req_clean(r);
				goto out;
			}
			held[nheld++] = r;
		}
		if (!nheld)
			break;
		for (size_t i = 0; i < nheld; i++) {
			struct req *r = held[i];

			if (r->active)
				continue;
			if (r->due_ms > now) {
				if (r->due_ms < next)
					next = r->due_ms;
				continue;
			}
			req_rewind(r);
			if (curl_multi_add_handle(s->multi, r->e)) {
				err = diag_set(d, -ENOMEM,
					       "curl_multi_add_handle failed");
				goto out;
			}
			r->active = true;
			active++;
			s->n.requests++;
			if (r->in_len)
				s->n.bytes_out += r->in_len;
		}
		if (curl_multi_perform(s->multi, &still)) {
			err = diag_set(d, -EIO, "curl_multi_perform failed");
			goto out;
		}
		ended = false;
		while ((m = curl_multi_info_read(s->multi, &msgs))) {
			struct req *r;

			if (m->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE,
					  (char **)&r);
			req_ended(s, r, m->data.result);
			curl_multi_remove_handle(s->multi, r->e);
			r->active = false;
			active--;
			ended = true;
			if (!r->done)
				continue;
			for (size_t i = 0; i < nheld; i++)
				if (held[i] == r) {
					held[i] = held[--nheld];
					break;
				}
			req_clean(r);
			if (fd->ended)
				fd->ended(fd->arg, r);
		}
		/*
		 * A slot came free: start the next request before waiting,
		 * or with none left in flight the wait below would sleep its
		 * whole 100 ms between one request and the next.
		 */
		if (ended)
			continue;
		wait_ms = 100;
		if (!active && next != UINT64_MAX) {
			now = clock_mono_ms();
			wait_ms = next > now ? (int)(next - now) : 0;
		} else if (next != UINT64_MAX && next - now < 100) {
			wait_ms = next > now ? (int)(next - now) : 0;
		}
		/* A backoff is slept in steps, to see a cancel. */
		if (wait_ms > 100)
			wait_ms = 100;
		if (active)
			curl_multi_poll(s->multi, NULL, 0, wait_ms, NULL);
		else if (wait_ms)
			usleep((useconds_t)wait_ms * 1000u);
	}
out:
	for (size_t i = 0; i < nheld; i++) {
		if (held[i]->active)
			curl_multi_remove_handle(s->multi, held[i]->e);
		held[i]->active = false;
		req_clean(held[i]);
	}
	return err;
}

struct run_list {
	struct req **rs;
	size_t n, taken;
};

static struct req *list_next(void *arg)
{
	struct run_list *l = arg;

	return l->taken < l->n ? l->rs[l->taken++] : NULL;
}

/* Run the n requests to their end, as run_fed() does. */
static int run(struct s3 *s, struct req **rs, size_t n, struct diag *d)
{
	struct run_list l = { .rs = rs, .n = n };
	struct feed fd = { .next = list_next, .arg = &l };

	return run_fed(s, &fd, d);
}

/* The outcome of a finished request as a return code, named in d. */
static int req_result(struct s3 *s, const struct req *r, struct diag *d)
{
	if (!r->err)
		return 0;
	return diag_set(d, r->err, "s3://%s/%s: %s %s", s->bucket, r->key,
			r->method, r->why);
}

static int run_one(struct s3 *s, struct req *r, struct diag *d)
{
	int err = run(s, &r, 1, d);

	return err ? err : req_result(s, r, d);
}

/* ---- operations -------------------------------------------------------- */

int s3_head(struct s3 *s, const char *key, struct s3_obj *o, struct diag *d)
{
	struct req *r = calloc(1, sizeof(*r));
	int err;

	if (!r)
		return diag_set(d, -ENOMEM, "out of memory");
	r->method = "HEAD";
	err = req_url(s, r, key, NULL, d);
	if (!err)
		err = run_one(s, r, d);
	if (!err)
		*o = r->obj;
	free(r);
	return err;
}

/* A GET of key into fd (or memory), with want's ETag as If-Match. */
static void get_init(struct req *r, int fd, uint64_t max,
		     const struct s3_obj *want)
{
	r->method = "GET";
	r->out_fd = fd;
	r->max = max;
	if (want && want->etag[0])
		snprintf(r->if_match, sizeof(r->if_match), "%s", want->etag);
}

/* Did the store send another version than want's ETag? Sets r's error. */
static bool etag_changed(struct req *r, const struct s3_obj *want)
{
	if (!want || !want->etag[0] || !r->obj.etag[0] ||
	    !strcmp(want->etag, r->obj.etag))
		return false;
	r->err = -ESTALE;
	snprintf(r->why, sizeof(r->why),
		 "the object changed (ETag %s, %s was asked for)", r->obj.etag,
		 want->etag);
	return true;
}

/* After a GET into a file: the size is right, and the file is that long. */
static int get_check(struct req *r, const struct s3_obj *want)
{
	if (r->err)
		return r->err;
	if (want && want->etag[0] && want->size != r->got) {
		r->err = -ESTALE;
		snprintf(r->why, sizeof(r->why),
			 "%" PRIu64 " bytes came, %" PRIu64 " were expected",
			 r->got, want->size);
		return r->err;
	}
	/* If-Match made the store check it; a store that did not is caught. */
	if (etag_changed(r, want))
		return r->err;
	r->obj.size = r->got;
	if (!r->to_mem && ftruncate(r->out_fd, (off_t)r->got)) {
		r->err = -errno;
		snprintf(r->why, sizeof(r->why),
			 "truncating the local copy: %s", strerror(errno));
	}
	return r->err;
}

/*
 * After a ranged GET: every byte of the range came, from the object of
 * the size asked for (a store that ignores Range sends the whole object,
 * which only a range of all of it may take).
 */
static int range_check(struct req *r, const struct s3_fetch *f)
{
	if (r->err)
		return r->err;
	if (r->got != f->len) {
		r->err = -EIO;
		snprintf(r->why, sizeof(r->why),
			 "%" PRIu64 " bytes of the range of %" PRIu64
			 " at %" PRIu64 " came",
			 r->got, f->len, f->off);
	} else if (r->status == 200 && f->off) {
		r->err = -EIO;
		snprintf(r->why, sizeof(r->why),
			 "the store sent the whole object for a range");
	} else if (f->want.etag[0] && r->obj.size &&
		   r->obj.size != f->want.size) {
		r->err = -ESTALE;
		snprintf(r->why, sizeof(r->why),
			 "the object has %" PRIu64 " bytes, %" PRIu64
			 " were expected",
			 r->obj.size, f->want.size);
	} else {
		etag_changed(r, &f->want);
	}
	return r->err;
}

int s3_get_fd(struct s3 *s, const char *key, int fd, uint64_t max,
	      const struct s3_obj *want, struct s3_obj *got, struct diag *d)
{
	struct req *r = calloc(1, sizeof(*r));
	int err;

	if (!r)
		return diag_set(d, -ENOMEM, "out of memory");
	get_init(r, fd, max, want);
	err = req_url(s, r, key, NULL, d);
	if (!err)
		err = run(s, &r, 1, d);
	if (!err) {
		get_check(r, want);
		err = req_result(s, r, d);
	}
	if (!err && got)
		*got = r->obj;
	free(r);
	return err;
}

int s3_get_mem(struct s3 *s, const char *key, size_t max, void **buf,
	       size_t *len, struct s3_obj *got, struct diag *d)
{
	struct req *r = calloc(1, sizeof(*r));
	int err;

	*buf = NULL;
	*len = 0;
	if (!r)
		return diag_set(d, -ENOMEM, "out of memory");
	get_init(r, -1, max, NULL);
	r->to_mem = true;
	err = req_url(s, r, key, NULL, d);
	if (!err)
		err = run(s, &r, 1, d);
	if (!err) {
		get_check(r, NULL);
		err = req_result(s, r, d);
	}
	if (!err && !r->mem) {
		r->mem = malloc(1);
		if (!r->mem)
			err = diag_set(d, -ENOMEM, "out of memory");
	}
	if (!err) {
		r->mem[r->got] = '\0';
		*buf = r->mem;
		*len = (size_t)r->got;
		if (got)
			*got = r->obj;
		r->mem = NULL;
	}
	free(r->mem);
	free(r);
	return err;
}

/* A range of the object, into memory or into the file at its offset? */
static bool is_range(const struct s3_fetch *f)
{
	return f->buf || (f->fd >= 0 && f->len);
}

/* The request for fetch f. */
static int fetch_req(struct s3 *s, const struct s3_fetch *f, struct req *r,
		     struct diag *d)
{
	get_init(r, f->fd, 0, &f->want);
	r->progress = f->progress;
	r->data = f->data;
	r->progress_arg = f->arg;
	if (is_range(f)) {
		if (!f->len)
			return diag_set(d, LOADER_EUSAGE,
					"s3://%s/%s: an empty range", s->bucket,
					f->key);
		r->out_fd = f->buf ? -1 : f->fd;
		r->out_off = f->buf ? 0 : f->off;
		r->buf = f->buf;
		r->buf_cap = f->len;
		snprintf(r->range, sizeof(r->range),
			 "bytes=%" PRIu64 "-%" PRIu64, f->off,
			 f->off + f->len - 1);
	} else if (f->fd < 0) {
		r->method = "HEAD";
	}
	return req_url(s, r, f->key, NULL, d);
}

/* Fetch f's outcome, from its ended request r. */
static int fetch_end(struct s3 *s, struct s3_fetch *f, struct req *r)
{
	struct diag one;

	if (is_range(f))
		range_check(r, f);
	else if (f->fd >= 0)
		get_check(r, &f->want);
	f->err = req_result(s, r, &one);
	f->got = r->obj;
	snprintf(f->why, sizeof(f->why), "%s", f->err ? one.msg : "");
	return f->err;
}

int s3_get_many(struct s3 *s, struct s3_fetch *f, size_t n, struct diag *d)
{
	struct req *rv = calloc(n ? n : 1, sizeof(*rv));
	struct req **rs = calloc(n ? n : 1, sizeof(*rs));
	int err = 0;

	if (!rv || !rs) {
		err = diag_set(d, -ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n && !err; i++) {
		rs[i] = &rv[i];
		err = fetch_req(s, &f[i], &rv[i], d);
	}
	if (!err)
		err = run(s, rs, n, d);
	if (err)
		goto out;
	for (size_t i = 0; i < n; i++)
		if (fetch_end(s, &f[i], &rv[i]) && !err)
			err = diag_set(d, f[i].err, "%s", f[i].why);
out:
	free(rv);
	free(rs);
	return err;
}

/* A request and its fetch, in one of s3_get_fed()'s slots. */
struct fed_slot {
	struct req r;
	struct s3_fetch f;
	bool used;
};

struct fed {
	struct s3 *s;
	struct fed_slot slot[S3_PARALLEL_MAX];
	bool (*next)(void *arg, struct s3_fetch *f);
	void (*done)(void *arg, struct s3_fetch *f);
	void *arg;
	struct diag *d;
	int err; /* setting a request up failed */
};

static struct req *fed_next(void *arg)
{
	struct fed *x = arg;

	for (size_t i = 0; i < S3_PARALLEL_MAX && !x->err; i++) {
		struct fed_slot *sl = &x->slot[i];

		if (sl->used)
			continue;
		memset(sl, 0, sizeof(*sl));
		if (!x->next(x->arg, &sl->f))
			return NULL;
		x->err = fetch_req(x->s, &sl->f, &sl->r, x->d);
		if (x->err)
			return NULL;
		sl->used = true;
		return &sl->r;
	}
	return NULL;
}

static void fed_ended(void *arg, struct req *r)
{
	struct fed *x = arg;
	struct fed_slot *sl = (struct fed_slot *)(void *)r;

	fetch_end(x->s, &sl->f, r);
	sl->used = false;
	x->done(x->arg, &sl->f);
}

int s3_get_fed(struct s3 *s, bool (*next)(void *arg, struct s3_fetch *f),
	       void (*done)(void *arg, struct s3_fetch *f), void *arg,
	       struct diag *d)
{
	struct fed *x = calloc(1, sizeof(*x));
	struct feed fd = { .next = fed_next, .ended = fed_ended, .arg = x };
	int err;

	if (!x)
		return diag_set(d, -ENOMEM, "out of memory");
	*x = (struct fed){
		.s = s, .next = next, .done = done, .arg = arg, .d = d
	};
	err = run_fed(s, &fd, d);
	if (!err)
		err = x->err;
	/* Stopped: those still held end with the run's error. */
	for (size_t i = 0; err && i < S3_PARALLEL_MAX; i++) {
		struct fed_slot *sl = &x->slot[i];

		if (!sl->used)
			continue;
		sl->f.err = err;
		sl->f.got = sl->r.obj;
		snprintf(sl->f.why, sizeof(sl->f.why), "%s", d->msg);
		done(arg, &sl->f);
	}
	free(x);
	return err;
}

/* ---- uploads ----------------------------------------------------------- */

/* Content-MD5 (base64) of len bytes of mem, or of fd from off. */
static int body_md5(const char *mem, int fd, uint64_t off, uint64_t len,
		    char out[32])
{
	unsigned char md[EVP_MAX_MD_SIZE], buf[1 << 16];
	EVP_MD_CTX *x = EVP_MD_CTX_new();
	unsigned mdlen = 0;
	int err = 0;

	if (!x || !EVP_DigestInit_ex(x, EVP_md5(), NULL)) {
		err = -ENOMEM;
		goto out;
	}
	if (mem) {
		EVP_DigestUpdate(x, mem, len);
	} else {
		for (uint64_t done = 0; done < len;) {
			size_t want = sizeof(buf);
			ssize_t r;

			if (want > len - done)
				want = (size_t)(len - done);
			r = pread(fd, buf, want, (off_t)(off + done));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				err = r < 0 ? -errno : LOADER_ETRUNC;
				goto out;
			}
			EVP_DigestUpdate(x, buf, (size_t)r);
			done += (uint64_t)r;
		}
	}
	EVP_DigestFinal_ex(x, md, &mdlen);
	EVP_EncodeBlock((unsigned char *)out, md, (int)mdlen);
out:
	EVP_MD_CTX_free(x);
	return err;
}

static int put_one(struct s3 *s, const char *key, const char *mem, int fd,
		   uint64_t size, struct s3_obj *o, struct diag *d)
{
	struct req *r = calloc(1, sizeof(*r));
	int err;

	if (!r)
		return diag_set(d, -ENOMEM, "out of memory");
	r->method = "PUT";
	r->in_mem = mem;
	r->in_fd = fd;
	r->in_len = size;
	r->to_mem = true;
	err = body_md5(mem, fd, 0, size, r->md5);
	if (err) {
		err = diag_set(d, err, "s3://%s/%s: reading what to store: %s",
			       s->bucket, key, loader_strerror(err));
		goto out;
	}
	err = req_url(s, r, key, NULL, d);
	if (!err)
		err = run_one(s, r, d);
	if (!err && o) {
		*o = r->obj;
		o->size = size;
	}
out:
	free(r->mem);
	free(r);
	return err;
}

/* The text between <tag> and </tag> in body, or "" . */
static void xml_text(const char *body, const char *tag, char *out, size_t cap)
{
	char open[64], close[64];
	const char *a, *b;

	out[0] = '\0';
	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	a = body ? strstr(body, open) : NULL;
	if (!a)
		return;
	a += strlen(open);
	b = strstr(a, close);
	if (b && (size_t)(b - a) < cap) {
		memcpy(out, a, (size_t)(b - a));
		out[b - a] = '\0';
	}
}

static int put_multipart(struct s3 *s, const char *key, int fd, uint64_t size,
			 struct s3_obj *o, struct diag *d)
{
	uint64_t part = s->p.part_bytes;
	size_t nparts, xcap, xlen = 0;
	struct req *init = calloc(1, sizeof(*init)), *fin = NULL, *abrt;
	struct req *pv = NULL, **ps = NULL;
	char upload[512], q[700], *xml = NULL;
	int err;

	if (!init)
		return diag_set(d, -ENOMEM, "out of memory");
	while ((size + part - 1) / part > S3_MAX_PARTS)
		part *= 2;
	nparts = (size_t)((size + part - 1) / part);
	init->method = "POST";
	init->to_mem = true;
	err = req_url(s, init, key, "uploads=", d);
	if (!err)
		err = run_one(s, init, d);
	if (err)
		goto out;
	xml_text(init->mem, "UploadId", upload, sizeof(upload));
	if (!upload[0]) {
		err = diag_set(
			d, -EIO,
			"s3://%s/%s: the store's reply to starting a multipart upload has no UploadId",
			s->bucket, key);
		goto out;
	}
	pv = calloc(nparts, sizeof(*pv));
	ps = calloc(nparts, sizeof(*ps));
	xcap = 128 + nparts * (S3_ETAG_MAX + 80);
	xml = malloc(xcap);
	if (!pv || !ps || !xml) {
		err = diag_set(d, -ENOMEM, "out of memory");
		goto abort;
	}
	for (size_t i = 0; i < nparts; i++) {
		struct req *r = &pv[i];

		ps[i] = r;
		r->method = "PUT";
		r->in_fd = fd;
		r->in_off = i * part;
		r->in_len = size - r->in_off < part ? size - r->in_off : part;
		r->to_mem = true;
		err = body_md5(NULL, fd, r->in_off, r->in_len, r->md5);
		if (err) {
			err = diag_set(
				d, err, "s3://%s/%s: reading part %zu: %s",
				s->bucket, key, i + 1, loader_strerror(err));
			goto abort;
		}
		/* Sorted: partNumber before uploadId (see the top). */
		snprintf(q, sizeof(q), "partNumber=%zu&uploadId=%s", i + 1,
			 upload);
		err = req_url(s, r, key, q, d);
		if (err)
			goto abort;
	}
	err = run(s, ps, nparts, d);
	for (size_t i = 0; !err && i < nparts; i++) {
		err = req_result(s, ps[i], d);
		if (!err && !ps[i]->obj.etag[0])
			err = diag_set(
				d, -EIO,
				"s3://%s/%s: part %zu stored without an ETag",
				s->bucket, key, i + 1);
	}
	if (err)
		goto abort;
	xlen = (size_t)snprintf(xml, xcap, "<CompleteMultipartUpload>");
	for (size_t i = 0; i < nparts; i++)
		xlen += (size_t)snprintf(
			xml + xlen, xcap - xlen,
			"<Part><PartNumber>%zu</PartNumber><ETag>%s</ETag></Part>",
			i + 1, ps[i]->obj.etag);
	xlen += (size_t)snprintf(xml + xlen, xcap - xlen,
				 "</CompleteMultipartUpload>");
	fin = calloc(1, sizeof(*fin));
	if (!fin) {
		err = diag_set(d, -ENOMEM, "out of memory");
		goto abort;
	}
	fin->method = "POST";
	fin->in_mem = xml;
	fin->in_len = xlen;
	fin->to_mem = true;
	snprintf(q, sizeof(q), "uploadId=%s", upload);
	err = req_url(s, fin, key, q, d);
	if (!err)
		err = run_one(s, fin, d);
	/* S3 may answer 200 with an error in the body. */
	if (!err && fin->mem && strstr(fin->mem, "<Error>")) {
		char code[64];

		xml_text(fin->mem, "Code", code, sizeof(code));
		err = diag_set(
			d, -EIO,
			"s3://%s/%s: completing the multipart upload: %s",
			s->bucket, key, code);
	}
	if (err)
		goto abort;
	if (o) {
		xml_text(fin->mem, "ETag", o->etag, sizeof(o->etag));
		if (!strncmp(o->etag, "&quot;", 6)) {
			/* Quotes arrive escaped in the XML. */
			char e[S3_ETAG_MAX];
			size_t l = strlen(o->etag);

			snprintf(e, sizeof(e), "\"%.*s\"",
				 l > 12 ? (int)(l - 12) : 0, o->etag + 6);
			snprintf(o->etag, sizeof(o->etag), "%s", e);
		}
		o->size = size;
	}
	goto out;
abort:
	abrt = calloc(1, sizeof(*abrt));
	if (abrt) {
		struct diag ignore;

		abrt->method = "DELETE";
		abrt->to_mem = true;
		snprintf(q, sizeof(q), "uploadId=%s", upload);
		if (!req_url(s, abrt, key, q, &ignore))
			(void)run_one(s, abrt, &ignore);
		free(abrt->mem);
		free(abrt);
	}
out:
	if (pv)
		for (size_t i = 0; i < nparts; i++)
			free(pv[i].mem);
	free(pv);
	free(ps);
	free(xml);
	if (fin)
		free(fin->mem);
	free(fin);
	free(init->mem);
	free(init);
	return err;
}

int s3_put_fd(struct s3 *s, const char *key, int fd, uint64_t size,
	      struct s3_obj *o, struct diag *d)
{
	if (size > s->p.part_bytes)
		return put_multipart(s, key, fd, size, o, d);
	return put_one(s, key, NULL, fd, size, o, d);
}

int s3_delete(struct s3 *s, const char *key, struct diag *d)
{
	struct req *r = calloc(1, sizeof(*r));
	int err;

	if (!r)
		return diag_set(d, -ENOMEM, "out of memory");
	r->method = "DELETE";
	r->to_mem = true;
	err = req_url(s, r, key, NULL, d);
	if (!err)
		err = run_one(s, r, d);
	/* Gone already is what was asked for (S3 answers 204 anyway). */
	if (err == -ENOENT && !strstr(d->msg, "(NoSuchBucket)")) {
		diag_clear(d);
		err = 0;
	}
	free(r->mem);
	free(r);
	return err;
}
