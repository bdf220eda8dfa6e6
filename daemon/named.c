/*
 * named.c - named streams (named.h): a name resolved at OPEN, the job
 * recorded, the saver that checkpoints each release, SAVED and FORGET,
 * and the expiry of names not written for a while.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fault.h"
#include "loader_error.h"
#include "msg.h"
#include "named.h"
#include "plog.h"
#include "producer.h"
#include "stream.h"

#include <xxhash.h>

/* How often what was checkpointed is flushed to the disk, at most. */
#define NAMED_SYNC_MS 1000

/*
 * A named stream's saver: a thread that writes the position as soon as
 * the client releases a batch and then tells the client (ring.h, saved),
 * whose release waits for that. One per named stream, from its OPEN to
 * its teardown, which stops it before the final write.
 */
struct saver {
	pthread_t thread;
	uint64_t *synced_ms; /* the server's: when the state was synced */
	struct state *state;
	struct producer *prod;
	struct named named; /* named.written: released at the last write */
	int stop;	    /* atomic */
	char label[96];
};

static uint64_t now_ms(void)
{
	return clock_mono_ns() / 1000000;
}

/* The wall clock in ms: when the state's records were written. */
static uint64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * The position of named stream n after released batches: the first
 * batch not yet released, and whether that is past its last epoch.
 */
static void named_at(const struct named *n, uint64_t released,
		     struct state_pos *p)
{
	p->generation = n->generation;
	p->epoch = n->start_epoch;
	p->batch = n->start_batch;
	order_advance(&n->sched, &p->epoch, &p->batch, released);
	p->finished = n->epochs && p->epoch >= n->epochs;
	p->updated_ms = wall_ms();
}

void named_write(uint64_t *synced_ms, struct state *st, const struct named *n,
		 uint64_t released, const char *label, struct state_pos *out)
{
	struct state_pos r;
	struct diag d;
	uint64_t now = now_ms();

	named_at(n, released, &r);
	if (state_put_pos(st, n->uid, n->name, n->rank, &r, &d))
		plog(PLOG_WARN, "%s: stream \"%s\": checkpoint: %s", label,
		     n->name, d.msg);
	if (now - __atomic_load_n(synced_ms, __ATOMIC_RELAXED) >=
	    NAMED_SYNC_MS) {
		__atomic_store_n(synced_ms, now, __ATOMIC_RELAXED);
		state_sync(st);
	}
	if (out)
		*out = r;
}

/* How long the saver sleeps at most between looks at the index. */
#define SAVER_POLL_NS (200 * 1000000ll)

static void *saver_main(void *arg)
{
	struct saver *sv = arg;

	pthread_setname_np(pthread_self(), "ld-save");
	for (;;) {
		uint64_t rel = producer_released(sv->prod);

		if (rel != sv->named.written) {
			named_write(sv->synced_ms, sv->state, &sv->named, rel,
				    sv->label, NULL);
			sv->named.written = rel;
			producer_set_saved(sv->prod, rel);
		}
		if (__atomic_load_n(&sv->stop, __ATOMIC_ACQUIRE))
			break;
		producer_wait_release(sv->prod, (uint32_t)rel, SAVER_POLL_NS);
	}
	return NULL;
}

struct saver *named_saver_start(uint64_t *synced_ms, struct state *st,
				struct producer *prod, const struct named *n,
				const char *label)
{
	struct saver *sv = mem_calloc(1, sizeof(*sv));

	if (!sv)
		return NULL;
	sv->synced_ms = synced_ms;
	sv->state = st;
	sv->prod = prod;
	sv->named = *n;
	snprintf(sv->label, sizeof(sv->label), "%s", label);
	if (fault_alloc() ||
	    pthread_create(&sv->thread, NULL, saver_main, sv)) {
		free(sv);
		return NULL;
	}
	return sv;
}

void named_saver_stop(struct saver *sv)
{
	if (!sv)
		return;
	__atomic_store_n(&sv->stop, 1, __ATOMIC_RELEASE);
	producer_wake_saver(sv->prod);
	pthread_join(sv->thread, NULL);
	free(sv);
}

/* The identity of a dataset: XXH3-64 of its manifest, read from fd. */
static int dataset_id(int fd, uint64_t *id, struct diag *d)
{
	XXH3_state_t *x = XXH3_createState();
	unsigned char buf[65536];
	uint64_t off = 0;
	ssize_t n;

	if (!x)
		return diag_set(d, -ENOMEM, "out of memory");
	XXH3_64bits_reset(x);
	while ((n = pread(fd, buf, sizeof(buf), (off_t)off)) > 0 &&
	       off < (64u << 20)) {
		XXH3_64bits_update(x, buf, (size_t)n);
		off += (uint64_t)n;
	}
	*id = XXH3_64bits_digest(x);
	XXH3_freeState(x);
	if (n < 0)
		return diag_set(d, -errno, "manifest: %s", strerror(errno));
	return 0;
}

/*
 * The identity of the options that fix a job's order (doc/design.md,
 * "Sample order"): batch size, order, seed, drop_last. Rank and world
 * deal it out (the job record keeps the world; a new one resumes
 * elastically). Outputs, pipeline and threads change bytes or speed,
 * not the order, and may change across a resume; so may the number of
 * epochs.
 */
static uint64_t opts_id(const struct stream_config *c)
{
	struct {
		uint32_t batch, order;
		uint64_t seed;
		uint32_t drop_last, pad;
	} k;

	memset(&k, 0, sizeof(k));
	k.batch = c->batch_size ? c->batch_size : STREAM_DEFAULT_BATCH;
	k.order = (uint32_t)c->order;
	k.seed = c->seed;
	k.drop_last = c->drop_last;
	return XXH3_64bits(&k, sizeof(k));
}

/* A name whose every epoch up to end was released: say so. */
static int named_finished(struct named_open *o, uint32_t end, struct diag *d)
{
	return diag_set(d, LOADER_EEND,
			"stream \"%s\" has released every batch of its %" PRIu32
			" epochs; ask for more epochs, or a fresh start",
			o->named.name, end);
}

/*
 * This rank starts at (epoch, batch), and runs to the job's end (0:
 * endless); a start at or past the end says the name is finished.
 */
static int named_start(struct named_open *o, struct stream_config *c,
		       uint32_t epoch, uint64_t batch, uint32_t end,
		       struct diag *d)
{
	if (end && epoch >= end)
		return named_finished(o, end, d);
	c->start_epoch = epoch;
	c->start_batch = batch;
	c->epochs = end ? end - epoch : 0;
	return 0;
}

/*
 * The ranks of world `from` stopped at o->from_epoch[r], from_batch[r]:
 * the rest of their epochs is dealt to this world (order.h, "Elastic
 * resume"), from the least of those epochs; the record is renewed.
 */
static int named_go_on(struct named_open *o, struct stream_config *c,
		       uint32_t from, uint32_t end, struct diag *d)
{
	uint32_t lo = UINT32_MAX;
	int err;

	for (uint32_t r = 0; r < from; r++)
		if (o->from_epoch[r] < lo)
			lo = o->from_epoch[r];
	err = named_start(o, c, lo, 0, end, d);
	if (err)
		return err;
	c->from_world = from;
	c->from_epoch = o->from_epoch;
	c->from_batch = o->from_batch;
	o->renew = true;
	plog(PLOG_INFO,
	     "%s: stream \"%s\" goes on from world %" PRIu32
	     " with world %" PRIu32 " (rank %" PRIu32 "), from epoch %" PRIu32,
	     o->label, o->named.name, from, c->world ? c->world : 1, c->rank,
	     lo);
	return 0;
}

/* Room for the positions of an old world of n ranks. */
static int named_from_alloc(struct named_open *o, uint32_t n, struct diag *d)
{
	o->from_epoch = mem_calloc(n, sizeof(*o->from_epoch));
	o->from_batch = mem_calloc(n, sizeof(*o->from_batch));
	if (!o->from_epoch || !o->from_batch)
		return diag_set(d, -ENOMEM, "out of memory");
	return 0;
}

/*
 * A job saved with another world goes on with this one: every rank of
 * the old world must have a position here (ranks on other nodes have
 * theirs in their own loaderd, unless the OPEN gives them).
 */
static int named_from_world(struct named_open *o, struct stream_config *c,
			    const struct state_pos *pos, uint32_t end,
			    struct diag *d)
{
	const struct state_job *old = &o->job;
	char missing[96] = "";
	uint32_t nmiss = 0;
	size_t at = 0;
	int err = named_from_alloc(o, old->world, d);

	if (err)
		return err;
	for (uint32_t r = 0; r < old->world; r++) {
		if (!pos[r].generation) {
			if (nmiss++ < 8 && at < sizeof(missing) - 12)
				at += (size_t)snprintf(
					missing + at, sizeof(missing) - at,
					"%s%" PRIu32, nmiss > 1 ? ", " : "", r);
			continue;
		}
		o->from_epoch[r] = pos[r].epoch;
		o->from_batch[r] = pos[r].batch;
	}
	if (nmiss)
		return diag_set(
			d, LOADER_EUSAGE,
			"stream \"%s\" was saved with world %" PRIu32
			" and this loaderd has no position of %" PRIu32
			" of its ranks (%s%s): they ran on another node or never opened; go on with world %" PRIu32
			", or open it with a fresh start",
			o->named.name, old->world, nmiss, missing,
			nmiss > 8 ? ", ..." : "", old->world);
	return named_go_on(o, c, old->world, end, d);
}

/* The identity of one dataset's files fds[0..nfds - 1], into *dsid. */
static int files_id(bool inplace, const int *fds, uint32_t nfds, uint64_t *dsid,
		    struct diag *d)
{
	int err = dataset_id(fds[0], dsid, d);

	if (err)
		return err;
	/*
	 * Tars read in place have no manifest: file 0 is their names, and
	 * their sizes stand for the record counts a manifest would give.
	 */
	for (uint32_t i = 1; inplace && i < nfds; i++) {
		struct stat st;

		if (fstat(fds[i], &st))
			return diag_set(d, -errno, "tar %" PRIu32 ": %s", i - 1,
					strerror(errno));
		*dsid = XXH3_64bits_withSeed(&st.st_size, sizeof(st.st_size),
					     *dsid);
	}
	return 0;
}

/* Each member's how and value of w, hashed on from h. */
static uint64_t weights_digest(const struct mixture_weights *w, uint64_t h)
{
	for (uint32_t m = 0; m < w->n; m++) {
		uint64_t how = w->how[m];

		h = XXH3_64bits_withSeed(&how, sizeof(how), h);
		h = XXH3_64bits_withSeed(&w->value[m], sizeof(w->value[m]), h);
	}
	return h;
}

/*
 * The identity of what c streams: its dataset's files, or a mixture's
 * members' in order, into *dsid; and a mixture's counts (what each
 * member gives an epoch, and the epoch size) into *mixid (never 0; 0 for
 * one dataset), which may change between epochs of a job.
 */
static int named_dataset_id(const struct stream_config *c, const int *fds,
			    uint32_t nfds, uint64_t *dsid, uint64_t *mixid,
			    struct mixture_weights *w, struct diag *d)
{
	*mixid = 0;
	memset(w, 0, sizeof(*w));
	if (!c->nmembers)
		return files_id(c->tar || c->lmdb, fds, nfds, dsid, d);
	*dsid = c->nmembers;
	w->n = c->nmembers;
	w->epoch_size = c->epoch_size;
	for (uint32_t m = 0; m < c->nmembers; m++) {
		const struct stream_member *mb = &c->members[m];
		uint64_t id;
		int err = files_id(mb->tar || mb->lmdb, mb->fds, mb->nfds, &id,
				   d);

		if (err)
			return diag_wrap(d, err, "member %" PRIu32, m);
		*dsid = XXH3_64bits_withSeed(&id, sizeof(id), *dsid);
		w->how[m] = mb->how;
		w->value[m] = mb->value;
	}
	*mixid = weights_digest(
		w, XXH3_64bits(&c->epoch_size, sizeof(c->epoch_size)));
	*mixid += !*mixid;
	return 0;
}

/*
 * Where a job's ranks stand, for a change of its mixture's counts: the
 * least epoch one of them is in (lo), and the first epoch none of them
 * has begun (from).
 */
struct span {
	uint32_t lo, from; /* UINT32_MAX and 0 before the first position */
};

/*
 * A position of job at the end of its epoch (past the epoch's batches,
 * by the counts that epoch has) is at the next one's start.
 */
static void named_normalize(const struct state_job *job, uint32_t *epoch,
			    uint64_t *batch)
{
	uint64_t per = job->counts_from && *epoch < job->counts_from ?
			       job->before_batches :
			       job->batches_per_epoch;

	if (per && *batch >= per) {
		++*epoch;
		*batch = 0;
	}
}

static void span_add(struct span *sp, const struct state_job *job,
		     uint32_t epoch, uint64_t batch)
{
	named_normalize(job, &epoch, &batch);
	if (epoch < sp->lo)
		sp->lo = epoch;
	if (epoch + (batch > 0) > sp->from)
		sp->from = epoch + (batch > 0);
}

/*
 * The request's weights differ from those the job's record keeps (o->job,
 * read): they take effect at the first epoch none of its ranks has begun
 * (sp, of every position this rank's start depends on), the epochs
 * before it dealt with the counts the record has for them. The record
 * (written by state_begin()) then keeps the earlier weights and where
 * the new ones begin. Refused where that cannot be told: a record that
 * kept no weights (of an older loaderd) with a rank part-way through an
 * epoch; a change while ranks stand on both sides of an earlier one (a
 * third count); a plan of another world's rest that deals an epoch from
 * there on.
 */
static int named_new_counts(struct named_open *o, const struct span *sp,
			    struct diag *d)
{
	struct state_job *old = &o->job;
	const char *name = o->named.name;
	uint32_t end = 0;

	if (old->mix_id == o->mix_id)
		return 0;
	if (!old->mix_id || !o->mix_id)
		return diag_set(
			d, LOADER_EUSAGE,
			"stream \"%s\" was saved as %s; open it with a fresh start to begin again",
			name,
			old->mix_id ? "a mixture, and this is one dataset" :
				      "one dataset, and this is a mixture");
	if (!old->weights.n && sp->from > sp->lo)
		return diag_set(
			d, LOADER_EUSAGE,
			"stream \"%s\": what its members give an epoch changed in the middle of epoch %" PRIu32
			", and its record, of an older loaderd, does not say what they gave: open it with the proportions it was saved with to finish the epoch, or with a fresh start",
			name, sp->lo);
	if (old->counts_from > sp->lo && sp->from > old->counts_from)
		return diag_set(
			d, LOADER_EUSAGE,
			"stream \"%s\": what its members give an epoch changed at epoch %" PRIu32
			" already, and a rank is still in epoch %" PRIu32
			" while another has begun epoch %" PRIu32
			": open it with the proportions of its last open until every rank has finished epoch %" PRIu32,
			name, old->counts_from, sp->lo, sp->from - 1,
			old->counts_from - 1);
	named_plan_id(old->plan, old->plan_words, &end);
	if (end > sp->from)
		return diag_set(
			d, LOADER_EUSAGE,
			"stream \"%s\": what its members give an epoch changed while it deals the rest of another world's epochs up to epoch %" PRIu32
			": open it with the proportions it was saved with until then",
			name, end - 1);
	if (old->counts_from <= sp->lo) {
		/* The earlier weights of the record no rank needs any more. */
		old->before = old->weights;
		old->before_batches = old->batches_per_epoch;
	}
	old->counts_from = sp->from > sp->lo ? sp->from : 0;
	old->weights = o->weights;
	old->mix_id = o->mix_id;
	plog(PLOG_INFO,
	     "%s: stream \"%s\": its members' counts change from epoch %" PRIu32,
	     o->label, name, sp->from);
	return 0;
}

/*
 * A stream that starts in epoch `epoch` of a job whose counts change
 * later (the record's counts_from) is dealt the earlier weights until
 * then; c points at the record's (o's: named_open_clear()).
 */
static void named_counts(struct named_open *o, struct stream_config *c,
			 uint32_t epoch)
{
	const struct state_job *job = &o->job;

	c->counts_from = 0;
	c->before = NULL;
	if (job->counts_from > epoch) {
		c->counts_from = job->counts_from;
		c->before = &job->before;
	}
}

static int named_resume(struct named_open *o, struct stream_config *c,
			const struct state_pos *pos, uint64_t dsid,
			uint64_t oid, uint32_t world, uint32_t end,
			struct diag *d);
static int named_given(struct named_open *o, struct stream_config *c,
		       uint64_t dsid, uint64_t oid, uint32_t world,
		       uint32_t end, struct diag *d);

int named_resolve(struct named_open *o, struct state *state, const char *name,
		  struct stream_config *c, const int *fds, uint32_t nfds,
		  struct diag *d)
{
	struct named *n = &o->named;
	struct state_job *old = &o->job;
	uint32_t end, world = c->world ? c->world : 1;
	struct state_pos *pos = NULL;
	uint64_t dsid = 0, oid, mixid;
	int err;

	if (!state)
		return diag_set(
			d, LOADER_EUSAGE,
			"named streams need loaderd's state directory, and this loaderd has none");
	snprintf(n->name, sizeof(n->name), "%s", name);
	n->rank = c->rank;
	n->world = world;
	err = named_dataset_id(c, fds, nfds, &dsid, &mixid, &o->weights, d);
	if (err)
		return err;
	o->mix_id = mixid;
	oid = opts_id(c);
	/* The last epoch, counted from 0 (the request counts from its start). */
	end = c->epochs ? c->start_epoch + c->epochs : 0;
	n->epochs = end;
	err = state_get_job(state, n->uid, n->name, old, &pos, d);
	if (err == -ENOENT || (err == LOADER_EFORMAT && o->fresh)) {
		memset(old, 0, sizeof(*old));
		o->renew = true;
		err = 0;
	} else if (!err && o->fresh) {
		/*
		 * Every rank of a job started afresh says so: the first
		 * renews a record of another kind, the others find it alike
		 * and only start their own positions over.
		 */
		o->renew = old->dataset_id != dsid || old->opts_id != oid ||
			   old->mix_id != mixid || old->world != world ||
			   old->plan_words || old->counts_from ||
			   old->start_epoch != c->start_epoch ||
			   old->start_batch != c->start_batch;
	}
	/* A record of an older loaderd learns the weights it was saved with. */
	if (!err && old->mix_id == mixid && !old->weights.n)
		old->weights = o->weights;
	if (!err && o->given.pos)
		err = named_given(o, c, dsid, oid, world, end, d);
	else if (!err)
		err = named_resume(o, c, pos, dsid, oid, world, end, d);
	if (!err)
		named_counts(o, c, c->start_epoch);
	free(pos);
	return err;
}

/* A record made anew for this request: its weights, no change pending. */
static void named_new_mix(struct named_open *o)
{
	struct state_job *job = &o->job;

	job->mix_id = o->mix_id;
	job->weights = o->weights;
	job->counts_from = 0;
	job->before_batches = 0;
	memset(&job->before, 0, sizeof(job->before));
}

uint64_t named_plan_id(const uint64_t *plan, size_t words, uint32_t *end)
{
	uint64_t id;

	*end = 0;
	if (!words)
		return 0;
	for (const uint64_t *w = plan + 1; w < plan + words;
	     w += 1 + (*w >> 32))
		if ((uint32_t)*w >= *end)
			*end = (uint32_t)*w + 1;
	id = XXH3_64bits(plan, words * sizeof(*plan));
	return id ? id : 1;
}

uint64_t named_job_plan(const struct state_job *job, const uint64_t *plan,
			size_t words, uint32_t *end)
{
	const struct mixture_weights *w = &job->before;
	uint64_t id = named_plan_id(plan, words, end);
	struct {
		uint32_t counts_from, n;
		uint64_t epoch_size, before_batches;
	} k;

	if (!job->counts_from)
		return id;
	memset(&k, 0, sizeof(k));
	k.counts_from = job->counts_from;
	k.n = w->n;
	k.epoch_size = w->epoch_size;
	k.before_batches = job->before_batches;
	id = weights_digest(w, XXH3_64bits_withSeed(&k, sizeof(k), id));
	if (*end < job->counts_from)
		*end = job->counts_from;
	return id ? id : 1;
}

/* The identity of what an OPEN's POSITIONS say (never 0). */
static uint64_t given_id(const struct openreq_given *g)
{
	struct {
		uint32_t world, plan_end;
		uint64_t plan;
	} k = { g->world, g->plan_end, g->plan };
	uint64_t id = XXH3_64bits_withSeed(g->pos, g->world * sizeof(*g->pos),
					   XXH3_64bits(&k, sizeof(k)));

	return id ? id : 1;
}

/* Is the job's record (read, not renewed) of this dataset and options? */
static int named_same(struct named_open *o, uint64_t dsid, uint64_t oid,
		      struct diag *d)
{
	const struct state_job *old = &o->job;
	const char *name = o->named.name;

	if (old->dataset_id != dsid)
		return diag_set(
			d, LOADER_EUSAGE,
			"stream \"%s\" was saved for another dataset (its manifest differs); open it with a fresh start to begin again",
			name);
	if (old->opts_id != oid)
		return diag_set(
			d, LOADER_EUSAGE,
			"stream \"%s\" was saved with other batch size, order, seed or drop_last; open it with a fresh start to begin again",
			name);
	return 0;
}

/*
 * named_resolve() for an OPEN that says where every rank of the job's
 * earlier world stopped (POSITIONS: the trainer's checkpoint, gathered
 * from ranks on every node). Those positions, not this loaderd's, say
 * where the job goes on: with the same world, this rank at its own;
 * with another, the rest of the old world's epochs dealt to the new
 * one. The plan of the record read here holds only if the record is of
 * that earlier world (a node that ran it); elsewhere the earlier world
 * is taken to have dealt whole epochs (libloader(3), "Elastic resume
 * across nodes").
 */
static int named_given(struct named_open *o, struct stream_config *c,
		       uint64_t dsid, uint64_t oid, uint32_t world,
		       uint32_t end, struct diag *d)
{
	struct state_job *old = &o->job;
	const struct openreq_given *g = &o->given;
	/* This rank's position, when the positions are of its own world. */
	const struct proto_position *mine =
		openreq_given_rank(g, world, c->rank);
	uint32_t lo = UINT32_MAX, rend;
	bool have = !o->fresh && !o->renew, dropped = false;
	uint64_t rec, from = given_id(g);
	int err;

	/*
	 * The earlier world's plan, or a change of weights that waits for
	 * an epoch, matters while a rank is in an epoch before its end:
	 * this loaderd must have it (a record of that world, of the same
	 * plan). Past those epochs, no plan is the same as it.
	 */
	rec = have && old->world == g->world ?
		      named_job_plan(old, old->plan, old->plan_words, &rend) :
		      0;
	if (have) {
		err = named_same(o, dsid, oid, d);
		if (err)
			return err;
		if (old->mix_id != o->mix_id) {
			/* From the first epoch no rank given has begun. */
			struct span sp = { UINT32_MAX, 0 };

			if (g->world != world || old->world != world)
				return diag_set(
					d, LOADER_EUSAGE,
					"stream \"%s\": what its members give an epoch changed along with its world (%" PRIu32
					" to %" PRIu32
					"): go on with the new world first, then change them",
					o->named.name, g->world, world);
			for (uint32_t r = 0; r < g->world; r++)
				span_add(&sp, old, g->pos[r].epoch,
					 g->pos[r].batch);
			err = named_new_counts(o, &sp, d);
			if (err)
				return err;
		}
	}
	if (have && old->world == world && old->from_id == from) {
		/*
		 * Another rank of this job went on from these very positions
		 * (it renewed the record): join it, this rank from where the
		 * job starts, or with the same world at its own position.
		 */
		o->resumed = true;
		c->plan = old->plan;
		c->plan_words = old->plan_words;
		return mine ? named_start(o, c, mine->epoch, mine->batch, end,
					  d) :
			      named_start(o, c, old->start_epoch,
					  old->start_batch, end, d);
	}
	old->from_id = from;
	for (uint32_t r = 0; r < g->world; r++)
		if (g->pos[r].epoch < lo)
			lo = g->pos[r].epoch;
	if (g->plan && lo < g->plan_end && rec != g->plan)
		return diag_set(
			d, LOADER_EUSAGE,
			"stream \"%s\": the positions given are of world %" PRIu32
			", which went on from another world, or changed its mixture's weights, part-way through an epoch before %" PRIu32
			" (plan %016" PRIx64
			"), and this loaderd has %s: open it on a node that ran world %" PRIu32
			", or give positions of epoch %" PRIu32 " or later",
			o->named.name, g->world, g->plan_end, g->plan,
			rec ? "another plan" : "no record of that world",
			g->world, g->plan_end);
	if (!g->plan || lo >= g->plan_end) {
		dropped = old->plan_words != 0;
		state_job_clear(old);
	}
	c->plan = old->plan;
	c->plan_words = old->plan_words;
	old->dataset_id = dsid;
	old->opts_id = oid;
	/*
	 * Without a record here, the positions given are taken to be of
	 * these counts (they carry none).
	 */
	if (!have)
		named_new_mix(o);
	o->resumed = true;
	if (g->world != world) {
		old->world = world; /* the renewed record's */
		err = named_from_alloc(o, g->world, d);
		if (err)
			return err;
		for (uint32_t r = 0; r < g->world; r++) {
			o->from_epoch[r] = g->pos[r].epoch;
			o->from_batch[r] = g->pos[r].batch;
		}
		return named_go_on(o, c, g->world, end, d);
	}
	/*
	 * The same world: each rank at its own position. A record of
	 * another job (or none, or one whose plan the positions do not
	 * need) is renewed alike by every rank of this one, starting where
	 * its least rank does.
	 */
	if (!have || old->world != world || dropped) {
		o->renew = true;
		old->start_epoch = lo;
		old->start_batch = 0;
	}
	old->world = world;
	if (!mine) /* openreq_config() refused such a rank already */
		return diag_set(d, LOADER_EUSAGE,
				"rank %" PRIu32 " of world %" PRIu32, c->rank,
				world);
	err = named_start(o, c, mine->epoch, mine->batch, end, d);
	if (!err)
		plog(PLOG_INFO,
		     "%s: stream \"%s\" rank %" PRIu32
		     " goes on from the position given, epoch %" PRIu32
		     " batch %" PRIu64,
		     o->label, o->named.name, c->rank, mine->epoch,
		     mine->batch);
	return err;
}

/*
 * The least of the positions this daemon saved of job's ranks (pos,
 * job->world of them; generation 0: none), or none (generation 0) when
 * it saved none. A rank it has no position of is skipped: it may run on
 * another node, whose daemon keeps its position.
 */
static struct state_pos least_position(const struct state_job *job,
				       const struct state_pos *pos)
{
	struct state_pos least = { .generation = 0 };

	for (uint32_t r = 0; r < job->world; r++) {
		const struct state_pos *p = &pos[r];

		if (p->generation &&
		    (!least.generation || p->epoch < least.epoch ||
		     (p->epoch == least.epoch && p->batch < least.batch)))
			least = *p;
	}
	return least;
}

/* named_resolve() with the job's record and positions read. */
static int named_resume(struct named_open *o, struct stream_config *c,
			const struct state_pos *pos, uint64_t dsid,
			uint64_t oid, uint32_t world, uint32_t end,
			struct diag *d)
{
	struct named *n = &o->named;
	struct state_job *old = &o->job;
	struct state_pos p;
	int err;

	old->from_id = 0; /* a record it renews is not from positions given */
	if (o->fresh || o->renew) {
		if (o->renew) {
			state_job_clear(old);
			old->start_epoch = c->start_epoch;
			old->start_batch = c->start_batch;
		}
		old->dataset_id = dsid;
		old->opts_id = oid;
		named_new_mix(o);
		old->world = world;
		return 0;
	}
	err = named_same(o, dsid, oid, d);
	if (err)
		return err;
	if (old->mix_id != o->mix_id && old->world != world)
		return diag_set(
			d, LOADER_EUSAGE,
			"stream \"%s\": what its members give an epoch changed along with its world (%" PRIu32
			" to %" PRIu32
			"): go on with the new world first, then change them at an epoch's start",
			n->name, old->world, world);
	/* Resumed: from a saved position, not from where the request says. */
	o->resumed = true;
	c->plan = old->plan;
	c->plan_words = old->plan_words;
	if (old->world != world) {
		err = named_from_world(o, c, pos, end, d);
		old->world = world; /* the renewed record's */
		return err;
	}
	/* Same world: pos has old->world entries, and rank is below it. */
	if (n->rank >= old->world)
		return diag_set(d, LOADER_EUSAGE,
				"rank %" PRIu32 " of world %" PRIu32, n->rank,
				old->world);
	/*
	 * A rank that resumes goes on at the least of the positions saved
	 * here of its world's ranks (ranks on other nodes are their
	 * daemons'). Ranks that stopped apart, one killed holding a batch it
	 * had not released, so go on with as many batches each, as DDP's
	 * lockstep needs; a rank that had released batches past that point
	 * is given them again (at least once, never skipped: loader(7)). A
	 * rank that has not run yet starts where the job does, whatever its
	 * world's ranks that opened before it have delivered since.
	 */
	p = pos[n->rank];
	if (p.generation && !o->go_on)
		p = least_position(old, pos);
	if (!p.generation) {
		p.epoch = old->start_epoch;
		p.batch = old->start_batch;
		o->resumed = old->plan_words ||
			     old->start_epoch != c->start_epoch ||
			     old->start_batch != c->start_batch;
	}
	named_normalize(old, &p.epoch, &p.batch);
	if (old->mix_id != o->mix_id) {
		/*
		 * The counts change from the first epoch no rank whose
		 * position this loaderd has has begun (this one's start
		 * among them).
		 */
		struct span sp = { UINT32_MAX, 0 };

		span_add(&sp, old, p.epoch, p.batch);
		for (uint32_t r = 0; r < old->world; r++)
			if (pos[r].generation)
				span_add(&sp, old, pos[r].epoch, pos[r].batch);
		err = named_new_counts(o, &sp, d);
		if (err)
			return err;
	}
	return named_start(o, c, p.epoch, p.batch, end, d);
}

int named_begin(struct named_open *o, struct state *st, struct stream *s,
		uint32_t start_epoch, uint64_t start_batch,
		const struct stream_layout *lay, struct diag *d)
{
	struct named *n = &o->named;
	struct state_job *job = &o->job;
	struct state_pos p;
	const uint64_t *plan;
	size_t words;
	struct diag sd;
	int err;

	if (!lay->batches_per_epoch) {
		n->name[0] = '\0'; /* nothing to deliver: nothing to save */
		return 0;
	}
	n->start_epoch = start_epoch;
	n->start_batch = start_batch;
	n->sched = lay->sched;
	n->written = 0;
	job->batches_per_epoch = lay->batches_per_epoch;
	if (lay->sched.later_from) {
		/* The record's count is that of its (later) weights. */
		job->before_batches = lay->sched.batches;
		job->batches_per_epoch = lay->sched.later_batches;
	}
	job->epochs = n->epochs;
	job->updated_ms = wall_ms();
	if (o->renew) {
		/* A new world's ranks all start where the plan does. */
		stream_plan(s, &plan, &words);
		state_job_clear(job);
		job->plan = (uint64_t *)plan; /* not freed: the stream's */
		job->plan_words = words;
		if (o->from_epoch) {
			job->start_epoch = start_epoch;
			job->start_batch = start_batch;
		}
	}
	p = (struct state_pos){ .epoch = start_epoch,
				.batch = start_batch,
				.updated_ms = job->updated_ms };
	err = state_begin(st, n->uid, n->name, job, o->renew, n->rank, &p,
			  &n->generation, &sd);
	if (o->renew) {
		job->plan = NULL;
		job->plan_words = 0;
	}
	if (err)
		return diag_set(d, err, "stream \"%s\": %s", n->name, sd.msg);
	return 0;
}

void named_open_clear(struct named_open *o)
{
	state_job_clear(&o->job);
	free(o->from_epoch);
	free(o->from_batch);
	o->from_epoch = NULL;
	o->from_batch = NULL;
	openreq_given_clear(&o->given);
}

/* SAVED: the index-th record of those the peer may see, and the total. */
static int saved_one(void *arg, uint32_t uid, const char *name,
		     const struct state_job *job, uint32_t rank,
		     const struct state_pos *p)
{
	struct named_query *q = arg;

	if (q->seen++ != q->index)
		return 0;
	q->ok.uid = uid;
	snprintf(q->ok.name, sizeof(q->ok.name), "%s", name);
	q->ok.epoch = p->epoch;
	q->ok.epochs = job->epochs;
	q->ok.batch = p->batch;
	q->ok.batches_per_epoch =
		job->counts_from && p->epoch < job->counts_from ?
			job->before_batches :
			job->batches_per_epoch;
	q->ok.updated_ms = p->updated_ms;
	q->ok.rank = rank;
	q->ok.world = job->world;
	q->ok.finished = p->finished;
	return 0; /* go on: total counts them all */
}

int named_query_set(struct named_query *q, uint16_t type, const void *m,
		    uint32_t uid, bool super, struct diag *d)
{
	memset(q, 0, sizeof(*q));
	q->type = type;
	q->uid = uid;
	if (type == PROTO_SAVED) {
		const struct proto_saved *saved = m;

		q->index = saved->index;
		q->all = super;
	} else {
		const struct proto_forget *forget = m;

		if (!memchr(forget->name, '\0', sizeof(forget->name)) ||
		    !forget->name[0] || (forget->flags & ~PROTO_FORGET_UID))
			return diag_set(
				d, LOADER_EPROTO,
				"FORGET: name not terminated, empty, or unknown flags");
		if ((forget->flags & PROTO_FORGET_UID) && forget->uid != uid &&
		    !super)
			return diag_set(
				d, -EPERM,
				"only root may forget another user's streams");
		if (forget->flags & PROTO_FORGET_UID)
			q->uid = forget->uid;
		memcpy(q->name, forget->name, sizeof(q->name));
	}
	return 0;
}

void named_query_run(struct named_query *q, struct state *st)
{
	if (q->type == PROTO_FORGET) {
		q->err = state_forget(st, q->uid, q->name, &q->d);
		if (q->err == -ENOENT)
			diag_set(&q->d, -ENOENT,
				 "no saved stream \"%s\" of uid %" PRIu32,
				 q->name, q->uid);
		else if (!q->err)
			state_sync(st);
		return;
	}
	q->err = state_each(st, q->uid, q->all, saved_one, q, &q->d);
	q->ok.total = q->seen;
	if (!q->err && q->seen && q->index >= q->seen)
		q->err = diag_set(&q->d, LOADER_EUSAGE,
				  "saved stream %" PRIu32 " of %" PRIu32,
				  q->index, q->seen);
}

void named_query_reply(const struct named_query *q, int fd, uint32_t seq,
		       const char *label)
{
	if (q->type == PROTO_FORGET) {
		struct proto_forget_ok ok = { .uid = q->uid };

		plog(PLOG_INFO,
		     "%s: forgot saved stream \"%s\" of uid %" PRIu32, label,
		     q->name, q->uid);
		(void)msg_send(fd, PROTO_FORGET_OK, seq, &ok, sizeof(ok), NULL,
			       0);
	} else {
		(void)msg_send(fd, PROTO_SAVED_OK, seq, &q->ok, sizeof(q->ok),
			       NULL, 0);
	}
}

void named_expire(struct state *st, uint64_t expire_ms)
{
	uint64_t n;
	struct diag d;

	if (state_expire(st, wall_ms(), expire_ms, &n, &d))
		plog(PLOG_WARN, "state: expiry: %s", d.msg);
	else if (n)
		plog(PLOG_INFO,
		     "state: forgot %" PRIu64
		     " named streams not checkpointed for %" PRIu64 " hours",
		     n, expire_ms / 3600000);
}
