/*
 * stream.c - a stream's set-up and life: check the config, open the
 * dataset, lay out the batches, size every buffer once, start and stop
 * the reader (reader.c) and the assembler (assemble.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec.h"
#include "dataset.h"
#include "dsopen.h"
#include "fault.h"
#include "fdio.h"
#include "imgpipe.h"
#include "ispec.h"
#include "lmdbds.h"
#include "loader_error.h"
#include "nodecache.h"
#include "order.h"
#include "plog.h"
#include "pool.h"
#include "s3fill.h"
#include "shardid.h"
#include "s3read.h"
#include "schema.h"
#include "shard.h"
#include "stream_priv.h"
#include "wds.h"

#define STREAM_READ_AHEAD 8 /* batches the reader may run ahead */

_Static_assert(STREAM_MAX_DIMS == SCHEMA_MAX_DIMS,
	       "an output sample has the dimensions of its field");
_Static_assert(STREAM_NAME_MAX == SCHEMA_NAME_MAX + 1,
	       "an output is named as its field");

/* ------------------------------------------------------------ set-up */

int stream_config_check(const struct stream_config *c, struct diag *d)
{
	if (c->batch_size > STREAM_MAX_BATCH)
		return diag_set(d, LOADER_EUSAGE,
				"batch size %" PRIu32 " above %d",
				c->batch_size, STREAM_MAX_BATCH);
	if (c->order > ORDER_QUASI)
		return diag_set(d, LOADER_EUSAGE, "unknown order %u",
				(unsigned)c->order);
	if (c->world > STREAM_MAX_WORLD || c->rank >= (c->world ? c->world : 1))
		return diag_set(d, LOADER_EUSAGE,
				"rank %" PRIu32 " of world %" PRIu32
				" (need rank < world <= %d)",
				c->rank, c->world, STREAM_MAX_WORLD);
	if (c->on_bad > STREAM_BAD_SKIP)
		return diag_set(d, LOADER_EUSAGE,
				"bad sample policy %u (0 fail, 1 skip)",
				(unsigned)c->on_bad);
	if (c->noutputs > STREAM_MAX_OUTPUTS)
		return diag_set(d, LOADER_EUSAGE,
				"%" PRIu32 " outputs, at most %d", c->noutputs,
				STREAM_MAX_OUTPUTS);
	if (c->epochs > 0 && (uint64_t)c->start_epoch + c->epochs > UINT32_MAX)
		return diag_set(d, LOADER_EUSAGE, "epochs out of range");
	if (c->prefetch_bytes > (64ull << 30))
		return diag_set(d, LOADER_EUSAGE,
				"prefetch budget above 64 GiB");
	for (uint32_t i = 0; i < c->noutputs; i++)
		if (!memchr(c->out[i].field, '\0', STREAM_NAME_MAX))
			return diag_set(d, LOADER_EUSAGE,
					"output %" PRIu32 ": name too long", i);
	if (c->nmembers > MIXTURE_MAX_MEMBERS || (c->nmembers && !c->members))
		return diag_set(d, LOADER_EUSAGE,
				"a mixture of %" PRIu32
				" members: 1 to %d, each given",
				c->nmembers, MIXTURE_MAX_MEMBERS);
	if (c->nmembers && (c->tar || c->lmdb || c->s3read || c->s3fill ||
			    c->shard_ids || c->tar_labels))
		return diag_set(
			d, LOADER_EUSAGE,
			"a mixture's files are its members': the stream has none of its own");
	if (!c->nmembers && c->epoch_size)
		return diag_set(d, LOADER_EUSAGE,
				"epoch size %" PRIu64 " without a mixture",
				c->epoch_size);
	if (c->counts_from && (!c->before || c->before->n != c->nmembers))
		return diag_set(d, LOADER_EUSAGE,
				"counts that change at epoch %" PRIu32
				" need the earlier weights of all %" PRIu32
				" members",
				c->counts_from, c->nmembers);
	return 0;
}

/*
 * The default room for a ragged field's values in a batch: batch_size
 * times the larger of the largest record (which bounds an uncompressed
 * value) and twice the field's mean unpacked size (for compressed ones),
 * from the shards' indexes and footers, capped.
 */
/* The dataset's largest record, in bytes, from its shards' indexes. */
static uint64_t largest_record(const struct stream *s)
{
	uint64_t largest = 0;

	for (uint32_t i = 0; i < s->ds->nshards; i++) {
		uint64_t n = shard_count(s->sh[i]);

		for (uint64_t r = 0; r < n; r++) {
			struct shard_rec rec;

			if (!shard_rec(s->sh[i], r, &rec) &&
			    rec.length > largest)
				largest = rec.length;
		}
	}
	return largest;
}

static uint64_t default_ragged(const struct stream *s, uint32_t field)
{
	uint64_t largest = largest_record(s), raw = 0, records = 0, room;

	for (uint32_t i = 0; i < s->ds->nshards; i++) {
		raw += shard_stats(s->sh[i], field).raw_bytes;
		records += shard_count(s->sh[i]);
	}
	if (records && 2 * (raw / records) > largest)
		largest = 2 * (raw / records);
	if (largest > STREAM_DEFAULT_RAGGED_MAX / s->lay.batch_size)
		return STREAM_DEFAULT_RAGGED_MAX;
	room = align_up(largest * s->lay.batch_size, 64);
	return room ? room : 64;
}

/* A bytes field or ragged tensor: a ragged output (stream.h). */
static int add_ragged(struct stream *s, uint32_t k, enum stream_cast cast,
		      struct diag *d)
{
	const struct field *f = &s->ds->schema.f[k];
	struct stream_out *o = &s->out[s->lay.noutputs];
	struct stream_tensor *t = &s->lay.out[s->lay.noutputs];

	if (!s->c.ragged)
		return diag_set(
			d, LOADER_EUSAGE,
			"output %s: a bytes field or ragged tensor is delivered as a ragged output, which this client does not take (libloader 1.2 or later does)",
			f->name);
	if (cast != STREAM_CAST_NONE)
		return diag_set(d, LOADER_EUSAGE,
				"output %s: a ragged field takes no cast",
				f->name);
	o->ragged = true;
	o->comp = f->comp;
	t->dtype = f->kind == FIELD_BYTES ? DT_U8 : f->dtype;
	t->ndim = f->kind == FIELD_BYTES ? 1 : f->ndim;
	t->shape[0] = 0;
	for (uint32_t i = 1; i < t->ndim; i++)
		t->shape[i] = f->dims[i];
	t->row_bytes = field_row_size(f);
	t->sample_bytes = 0;
	t->ragged = true;
	t->capacity = s->c.ragged_bytes ? align_up(s->c.ragged_bytes, 64) :
					  default_ragged(s, k);
	s->lay.noutputs++;
	s->nragged++;
	return 0;
}

/* How many field names an error lists before it says "...". */
#define STREAM_FIELDS_NAMED 10

/*
 * The schema's field names, comma-separated, for a message: the first
 * STREAM_FIELDS_NAMED, then "..." (a dataset may have 64 of them).
 */
static const char *field_list(const struct schema *sc, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (uint32_t k = 0;
	     k < sc->nfields && k <= STREAM_FIELDS_NAMED && n < len; k++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", k ? ", " : "",
				      k < STREAM_FIELDS_NAMED ? sc->f[k].name :
								"...");
	return buf;
}

static int add_output(struct stream *s, const char *name, enum stream_cast cast,
		      struct diag *d)
{
	const struct schema *sc = &s->ds->schema;
	int k = schema_find(sc, name);
	const struct field *f;
	struct stream_out *o = &s->out[s->lay.noutputs];
	struct stream_tensor *t = &s->lay.out[s->lay.noutputs];
	uint64_t n;

	if (k < 0) {
		/* Names of STREAM_NAME_MAX bytes at most, and the "...". */
		char fields[STREAM_FIELDS_NAMED * (STREAM_NAME_MAX + 1) + 8];

		if (sc->nfields > STREAM_FIELDS_NAMED)
			return diag_set(
				d, LOADER_EUSAGE,
				"output %s: no such field in the dataset (its %" PRIu32
				" fields: %s)",
				name, sc->nfields,
				field_list(sc, fields, sizeof(fields)));
		return diag_set(
			d, LOADER_EUSAGE,
			"output %s: no such field in the dataset (its fields: %s)",
			name, field_list(sc, fields, sizeof(fields)));
	}
	f = &sc->f[k];
	for (uint32_t i = 0; i < s->lay.noutputs; i++)
		if (s->out[i].field == (uint32_t)k)
			return diag_set(d, LOADER_EUSAGE,
					"output %s named twice", name);
	snprintf(t->name, sizeof(t->name), "%s", f->name);
	o->field = (uint32_t)k;
	if (f->kind == FIELD_JPEG) {
		const struct ispec *sp;
		uint32_t dims[3];

		if (!s->pipe)
			return diag_set(
				d, LOADER_EUSAGE,
				"output %s: a jpeg field needs an image pipeline (e.g. \"decode | rrc 224 | flip 0.5 | normalize imagenet | f16 | nchw\")",
				name);
		if (cast != STREAM_CAST_NONE)
			return diag_set(
				d, LOADER_EUSAGE,
				"output %s: a jpeg field takes no cast; the pipeline sets its type",
				name);
		sp = imgpipe_spec(s->pipe);
		/* jpeg fields are stored as they are: nothing to unpack */
		o->image = true;
		t->dtype = sp->dtype;
		t->sample_bytes = ispec_out_bytes(sp);
		t->ndim = ispec_out_shape(sp, dims);
		for (uint32_t i = 0; i < t->ndim; i++)
			t->shape[i] = dims[i];
		s->lay.noutputs++;
		return 0;
	}
	if (f->kind == FIELD_BYTES || field_ragged(f))
		return add_ragged(s, (uint32_t)k, cast, d);
	n = field_fixed_size(f) / dtype_size(f->dtype);
	o->cast = cast;
	switch (cast) {
	case STREAM_CAST_NONE: t->dtype = f->dtype; break;
	case STREAM_CAST_F32_UNIT:
		if (f->dtype != DT_U8)
			return diag_set(
				d, LOADER_EUSAGE,
				"output %s: \"unit\" needs a u8 field, it is %s",
				name, dtype_name(f->dtype));
		t->dtype = DT_F32;
		break;
	case STREAM_CAST_F32:
		if (f->dtype == DT_F16 || f->dtype == DT_F64)
			return diag_set(
				d, LOADER_EUSAGE,
				"output %s: \"f32\" casts integer fields, it is %s",
				name, dtype_name(f->dtype));
		t->dtype = DT_F32;
		break;
	default:
		return diag_set(d, LOADER_EUSAGE, "output %s: unknown cast %u",
				name, (unsigned)cast);
	}
	t->sample_bytes = n * dtype_size(t->dtype);
	t->ndim = f->ndim;
	for (uint32_t i = 0; i < f->ndim; i++)
		t->shape[i] = f->dims[i];
	o->field_bytes = field_fixed_size(f);
	o->elems = n;
	o->src_dtype = f->dtype;
	o->comp = f->comp;
	if (field_fixed_size(f) > s->max_field)
		s->max_field = field_fixed_size(f);
	s->lay.noutputs++;
	return 0;
}

/* The image pipeline, when the config has one. */
static int setup_pipeline(struct stream *s, const char *spec,
			  uint64_t max_pixels, struct diag *d)
{
	struct ispec sp;
	char text[ISPEC_TEXT_MAX];
	int err;

	if (!spec || !spec[0])
		return 0;
	err = ispec_parse(&sp, spec, d);
	if (err)
		return diag_wrap(d, err, "pipeline");
	/*
	 * With schedules, the pipeline is made for the epoch of the largest
	 * output, so that its buffers and the batches' room hold every
	 * epoch's; the assembler derives each epoch's from it (assemble.c).
	 */
	if (sp.sched || sp.at) {
		if (strlen(spec) >= sizeof(s->spec_text))
			return diag_set(d, LOADER_EUSAGE,
					"pipeline: longer than %zu bytes",
					sizeof(s->spec_text) - 1);
		snprintf(s->spec_text, sizeof(s->spec_text), "%s", spec);
		s->sched = true;
		err = ispec_parse_epoch(&sp, spec, sp.size_max_epoch, d);
		if (err)
			return diag_wrap(d, err, "pipeline");
	}
	err = imgpipe_new(&s->pipe, &sp, max_pixels, d);
	if (err)
		return err;
	if (s->sched) {
		plog(PLOG_INFO,
		     "%s: pipeline \"%s\" (schedules; the largest output is "
		     "epoch %" PRIu32 "'s, size %" PRIu32 "), bad samples: %s",
		     s->label, spec, sp.size_max_epoch, sp.size,
		     s->c.on_bad == STREAM_BAD_SKIP ? "skip" : "fail");
		return 0;
	}
	ispec_format(&sp, text, sizeof(text));
	plog(PLOG_INFO, "%s: pipeline \"%s\", bad samples: %s", s->label, text,
	     s->c.on_bad == STREAM_BAD_SKIP ? "skip" : "fail");
	return 0;
}

static int setup_outputs(struct stream *s, struct diag *d)
{
	const struct stream_config *c = &s->c;
	int err;

	if (c->noutputs == 0) {
		for (uint32_t k = 0; k < s->ds->schema.nfields; k++) {
			/* The key and the like, only when named (schema.h). */
			if (schema_meta_name(s->ds->schema.f[k].name))
				continue;
			if (s->lay.noutputs == STREAM_MAX_OUTPUTS)
				return diag_set(
					d, LOADER_EUSAGE,
					"the dataset has %" PRIu32
					" fields; name at most %d outputs",
					s->ds->schema.nfields,
					STREAM_MAX_OUTPUTS);
			err = add_output(s, s->ds->schema.f[k].name,
					 STREAM_CAST_NONE, d);
			if (err)
				return err;
		}
		return 0;
	}
	for (uint32_t i = 0; i < c->noutputs; i++) {
		err = add_output(s, c->out[i].field, c->out[i].cast, d);
		if (err)
			return err;
	}
	return 0;
}

/* An integer output of one value a sample: a label the batch stages take. */
static bool label_like(const struct stream *s, uint32_t k)
{
	const struct field *f = &s->ds->schema.f[s->out[k].field];

	return !s->out[k].image && !s->out[k].ragged && f->dtype >= DT_U8 &&
	       f->dtype <= DT_I64 && s->out[k].elems == 1;
}

/*
 * The batch stages of the pipeline (mix.h): find the label output (the
 * one integer output of one value a sample, or among several the one
 * named "label"), the class count (classes N, else the dataset's), and
 * make that output soft: f32 [classes] a sample.
 */
static int setup_batch(struct stream *s, struct diag *d)
{
	const struct ispec_batch *sb;
	uint32_t found = 0, image = 0, at = 0, nds = s->ds->nclasses;
	struct stream_tensor *t;

	if (!s->pipe || !imgpipe_spec(s->pipe)->batch.on)
		return 0;
	sb = &imgpipe_spec(s->pipe)->batch;
	for (uint32_t k = 0; k < s->lay.noutputs; k++) {
		image += s->out[k].image;
		if (!label_like(s, k))
			continue;
		if (!found || !strcmp(s->lay.out[k].name, "label"))
			at = k;
		found++;
	}
	if ((sb->mixup || sb->cutmix) && !image)
		return diag_set(
			d, LOADER_EUSAGE,
			"pipeline: mixup and cutmix mix images, and no output is a jpeg field");
	if (!found)
		return diag_set(
			d, LOADER_EUSAGE,
			"pipeline: the batch stages (mixup, cutmix, label_smoothing) make soft labels of a label output, an integer field of one value a sample, and no output is one");
	if (found > 1 && strcmp(s->lay.out[at].name, "label"))
		return diag_set(
			d, LOADER_EUSAGE,
			"pipeline: the batch stages need one label output: %" PRIu32
			" outputs are integers of one value a sample, and none is named \"label\"",
			found);
	if (!sb->classes && !nds)
		return diag_set(
			d, LOADER_EUSAGE,
			"pipeline: the batch stages need the number of classes, and the dataset has no class list: add \"classes N\" to the pipeline");
	if (sb->classes && sb->classes < nds)
		return diag_set(d, LOADER_EUSAGE,
				"pipeline: classes %" PRIu32
				" is below the dataset's %" PRIu32 " classes",
				sb->classes, nds);
	s->mixing = true;
	s->classes = sb->classes ? sb->classes : nds;
	s->soft = at;
	s->out[at].soft = true;
	t = &s->lay.out[at];
	t->dtype = DT_F32;
	t->ndim = 1;
	memset(t->shape, 0, sizeof(t->shape));
	t->shape[0] = s->classes;
	t->sample_bytes = (uint64_t)s->classes * sizeof(float);
	return 0;
}

/*
 * Is every output a plain copy of its field, and the batch small enough
 * for one thread (stream_priv.h, light)?
 */
static bool light_outputs(const struct stream *s)
{
	uint64_t bytes = 0;

	for (uint32_t k = 0; k < s->lay.noutputs; k++) {
		const struct stream_out *o = &s->out[k];

		if (o->image || o->ragged || o->soft || o->comp != COMP_NONE ||
		    o->cast != STREAM_CAST_NONE)
			return false;
		bytes += s->lay.out[k].sample_bytes * s->lay.batch_size;
	}
	return s->lay.noutputs > 0 && bytes <= STREAM_LIGHT_MAX;
}

/*
 * The layout a light stream's records share (stream_priv.h, fix_len): the
 * same in every shard, or none.
 */
static void fixed_layout(struct stream *s)
{
	uint32_t off[SCHEMA_MAX_FIELDS] = { 0 };
	unsigned char head[4 * SCHEMA_MAX_FIELDS] = { 0 };

	s->fix_len = 0;
	memset(s->fix_off, 0, sizeof(s->fix_off));
	memset(s->fix_head, 0, sizeof(s->fix_head));
	if (!s->light || !s->ds->nshards)
		return;
	s->fix_len = shard_fixed_layout(s->sh[0], s->fix_off, s->fix_head);
	for (uint32_t i = 1; s->fix_len && i < s->ds->nshards; i++)
		if (shard_fixed_layout(s->sh[i], off, head) != s->fix_len ||
		    memcmp(off, s->fix_off, sizeof(off)) ||
		    memcmp(head, s->fix_head, sizeof(head)))
			s->fix_len = 0;
	s->fix_hlen = 4 * shard_schema(s->sh[0])->nfields;
}

/*
 * What the stream will hold beside its ring, before it allocates: the
 * prefetch arena, no larger than the dataset's shards (a larger one
 * would only cycle through memory the dataset never needs, and make it
 * all resident), and each worker's scratch. Refused above max_mem.
 */
/* The arena of a budget of want bytes: capped by the data, page-aligned. */
static uint64_t arena_bytes(const struct stream *s, uint64_t want)
{
	uint64_t data = 0;

	for (uint32_t i = 0; i < s->ds->nshards; i++)
		data += shard_file_size(s->sh[i]);
	/* Room for the alignment of every read in flight, above the data. */
	data += (uint64_t)STREAM_READ_AHEAD * s->lay.batch_size * 2 *
		STREAM_DIRECT_ALIGN;
	if (want > data)
		want = data;
	/* Page-aligned: O_DIRECT reads land in it. */
	return align_up(want, STREAM_DIRECT_ALIGN);
}

static int plan_memory(struct stream *s, struct diag *d)
{
	uint64_t per_worker, workers = pool_workers(s->pool) + 1;

	s->arena_size =
		arena_bytes(s, s->c.prefetch_bytes ? s->c.prefetch_bytes :
						     STREAM_DEFAULT_PREFETCH);
	per_worker = (s->max_field ? s->max_field : 1) +
		     (s->pipe ? imgpipe_ws_bytes(s->pipe) : 0);
	s->lay.mem_bytes =
		s->arena_size + workers * per_worker + s->lay.index_bytes;
	if (s->c.max_mem && s->lay.mem_bytes > s->c.max_mem)
		return diag_set(d, LOADER_ETOOBIG,
				"the stream would hold %" PRIu64
				" bytes beside its ring (prefetch %" PRIu64
				", decode scratch %" PRIu64 " x %" PRIu64
				" workers, shard indexes %" PRIu64
				"), more than the %" PRIu64 " %s",
				s->lay.mem_bytes, s->arena_size, per_worker,
				workers, s->lay.index_bytes, s->c.max_mem,
				s->c.max_mem_why ? s->c.max_mem_why :
						   "allowed");
	return 0;
}

/*
 * Count what shard i's index holds in memory (lay.index_bytes), and
 * refuse as soon as the indexes alone pass max_mem: a dataset of many
 * records per shard is refused before all of its footers are read.
 */
static int count_index(struct stream *s, uint32_t i, const char *name,
		       struct diag *d)
{
	uint64_t mem = shard_index_bytes(s->sh[i]);
	struct stat st;

	/* A shard read in place: its header and tail in a memfd. */
	if (s3read_has(s->c.s3read, i) && !fstat(s->fds[i + 1], &st))
		mem += (uint64_t)st.st_blocks * 512;
	s->lay.index_bytes += mem;
	if (s->c.max_mem && s->lay.index_bytes > s->c.max_mem)
		return diag_set(
			d, LOADER_ETOOBIG,
			"the indexes of the dataset's shards take %" PRIu64
			" bytes of memory by shard %" PRIu32 " (%s: %" PRIu64
			"), more than the %" PRIu64 " %s",
			s->lay.index_bytes, i, name, mem, s->c.max_mem,
			s->c.max_mem_why ? s->c.max_mem_why : "allowed");
	return 0;
}

/*
 * The arena of s->arena_size bytes, in huge pages where the kernel has
 * them: a stream's first pass over a 64 MiB arena in 4 KiB pages takes
 * 16,384 page faults, which cost a JPEG epoch from page-cached shards a
 * fifth of its time on a virtual machine (1.25 s against 0.97 s). Only
 * advice: without transparent huge pages it is 4 KiB pages.
 */
static void alloc_arena(struct stream *s)
{
	if (s->arena_size >= STREAM_HUGE_PAGE) {
		s->arena = mem_aligned(STREAM_HUGE_PAGE, s->arena_size);
		if (s->arena)
			(void)madvise(s->arena, s->arena_size, MADV_HUGEPAGE);
	} else {
		s->arena = mem_aligned(STREAM_DIRECT_ALIGN, s->arena_size);
	}
}

static int setup_prefetch(struct stream *s, struct diag *d)
{
	uint32_t b = s->lay.batch_size;

	alloc_arena(s);
	/*
	 * How many batches the reader may run ahead, within the byte budget.
	 * Deep enough to keep storage busy, shallow enough that batches read
	 * from the page cache are still in the CPU cache when decoded.
	 */
	s->npb = STREAM_READ_AHEAD;
	s->pb = mem_calloc(s->npb, sizeof(*s->pb));
	s->refs = mem_calloc(b, sizeof(*s->refs));
	s->ext = mem_calloc(b, sizeof(*s->ext));
	if (s->c.s3read)
		s->rq = mem_calloc(b, sizeof(*s->rq));
	if (!s->arena || !s->pb || !s->refs || !s->ext ||
	    (s->c.s3read && !s->rq))
		return diag_set(d, -ENOMEM, "prefetch of %" PRIu64 " bytes",
				s->arena_size);
	for (uint32_t i = 0; i < s->npb; i++) {
		struct stream_pb *p = &s->pb[i];

		p->rec = mem_calloc(b, sizeof(*p->rec));
		p->len = mem_calloc(b, sizeof(*p->len));
		p->gidx = mem_calloc(b, sizeof(*p->gidx));
		p->shard = mem_calloc(b, sizeof(*p->shard));
		p->ridx = mem_calloc(b, sizeof(*p->ridx));
		p->rerr = mem_calloc(b, sizeof(*p->rerr));
		p->cached = mem_calloc(b, sizeof(*p->cached));
		if (!p->rec || !p->len || !p->gidx || !p->shard || !p->ridx ||
		    !p->rerr || !p->cached)
			return -ENOMEM;
	}
	return 0;
}

static int setup_workers(struct stream *s)
{
	s->nworkers = pool_workers(s->pool) + 1;
	s->codec = mem_calloc(s->nworkers, sizeof(*s->codec));
	s->scratch = mem_calloc(s->nworkers, sizeof(*s->scratch));
	s->ws = mem_calloc(s->nworkers, sizeof(*s->ws));
	s->bad = mem_calloc(s->lay.batch_size, 1);
	s->rep = mem_calloc(s->lay.batch_size, sizeof(*s->rep));
	if (!s->codec || !s->scratch || !s->ws || !s->bad || !s->rep)
		return -ENOMEM;
	if (s->mixing) {
		s->mixlab = mem_calloc(s->lay.batch_size, sizeof(*s->mixlab));
		if (!s->mixlab)
			return -ENOMEM;
	}
	if (s->nragged) {
		uint64_t n = (uint64_t)s->lay.batch_size + 1;

		s->roff = mem_calloc(n * s->lay.noutputs, sizeof(uint64_t));
		s->roff2 = mem_calloc(n, sizeof(uint64_t));
		s->rbig = mem_calloc(n, 1);
		s->rbig_size = mem_calloc(n, sizeof(uint64_t));
		if (!s->roff || !s->roff2 || !s->rbig || !s->rbig_size)
			return -ENOMEM;
	}
	if (s->c.timing) {
		s->wt = mem_aligned(64, s->nworkers * sizeof(*s->wt));
		if (!s->wt)
			return -ENOMEM;
		memset(s->wt, 0, s->nworkers * sizeof(*s->wt));
	}
	for (uint32_t i = 0; i < s->nworkers; i++) {
		if (codec_ctx_new(&s->codec[i], 0))
			return -ENOMEM;
		s->scratch[i] = mem_alloc(s->max_field ? s->max_field : 1);
		if (!s->scratch[i])
			return -ENOMEM;
		if (s->pipe && imgpipe_ws_new(s->pipe, s->c.timing, &s->ws[i]))
			return -ENOMEM;
	}
	return 0;
}

/*
 * The node cache's set of this dataset's files, as the client's
 * descriptors show them (nodecache.h): none if one cannot be told.
 */
static void attach_cache(struct stream *s)
{
	struct nodecache_file *f;
	uint32_t n = s->ds->nshards;

	if (!s->c.cache)
		return;
	f = mem_calloc(n, sizeof(*f));
	if (!f)
		return;
	for (uint32_t i = 0; i < n; i++) {
		struct stat st;
		uint64_t id[2];

		/*
		 * A shard of an object store is its object's version,
		 * however it is read (shardid.h).
		 */
		if (shardid_get(s->c.shard_ids, i, id)) {
			f[i] = (struct nodecache_file){
				.dev = 0,
				.ino = id[1],
				.size = shard_file_size(s->sh[i]),
				.mtime_ns = (int64_t)id[0],
				.ctime_ns = -1,
				.records = shard_count(s->sh[i]),
			};
			continue;
		}
		if (fstat(s->fds[i + 1], &st)) {
			free(f);
			return;
		}
		f[i] = (struct nodecache_file){
			.dev = st.st_dev,
			.ino = st.st_ino,
			.size = (uint64_t)st.st_size,
			.mtime_ns = st.st_mtim.tv_sec * 1000000000ll +
				    st.st_mtim.tv_nsec,
			.ctime_ns = st.st_ctim.tv_sec * 1000000000ll +
				    st.st_ctim.tv_nsec,
			.records = shard_count(s->sh[i]),
		};
	}
	s->cset = nodecache_attach(s->c.cache, f, n);
	free(f);
}

static int replan(struct stream *s, struct order_params *op, struct diag *d);
static int plan_start(struct stream *s, struct diag *d);
static int order_open(struct stream *s, struct order_params *op,
		      struct diag *d);

static int open_dataset(struct stream *s, const char *origin, struct diag *d)
{
	uint64_t *counts;
	struct order_params op;
	int err;

	if (s->c.tar || s->c.lmdb) {
		struct dsopen_in in = { .fds = s->fds + 1,
					.n = s->nfds - 1,
					.lmdb = s->c.lmdb,
					.labels = s->c.tar_labels,
					.store = s->c.index,
					.log = s->label };

		err = dsopen_inplace(&s->ds, &s->wix, &in, d);
		if (err)
			return err;
	} else {
		if (s->nfds < 2)
			return diag_set(
				d, LOADER_EUSAGE,
				"a dataset needs its manifest and at least one shard");
		err = dataset_load_fd(&s->ds, s->fds[0], "manifest.json", d);
		if (err)
			return err;
	}
	if (s->ds->nshards != s->nfds - 1)
		return diag_set(d, LOADER_EUSAGE,
				"manifest lists %" PRIu32
				" shards, client sent %" PRIu32,
				s->ds->nshards, s->nfds - 1);
	s->sh = mem_calloc(s->ds->nshards, sizeof(*s->sh));
	counts = mem_calloc(s->ds->nshards, sizeof(*counts));
	if (!s->sh || !counts) {
		free(counts);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < s->ds->nshards; i++) {
		size_t ol = origin ? strlen(origin) : 0;
		char name[256];

		snprintf(name, sizeof(name), "%s%s%s", origin ? origin : "",
			 ol && origin[ol - 1] != '/' ? "/" : "",
			 s->ds->shards[i].file);
		err = s->c.tar || s->c.lmdb ?
			      shard_open_wds(&s->sh[i], s->fds[i + 1], name,
					     s->wix[i], d) :
			      shard_open(&s->sh[i], s->fds[i + 1], name, d);
		if (!err)
			err = dataset_check_shard(s->ds, i, s->sh[i], d);
		if (!err)
			err = count_index(s, i, name, d);
		if (err) {
			free(counts);
			return err;
		}
		counts[i] = shard_count(s->sh[i]);
		/*
		 * A shard read in place is not read through its fd; one
		 * arriving is read from the page cache it is written to.
		 */
		if (s->c.direct && !s3read_has(s->c.s3read, i) &&
		    !s3fill_has(s->c.s3fill, i)) {
			int fl = fcntl(s->fds[i + 1], F_GETFL);

			/* The client closed its copies: the flag is ours alone. */
			if (fl < 0 ||
			    fcntl(s->fds[i + 1], F_SETFL, fl | O_DIRECT)) {
				err = diag_set(d, -errno,
					       "%s: O_DIRECT not possible: %s",
					       s->ds->shards[i].file,
					       strerror(errno));
				free(counts);
				return err;
			}
		}
	}
	attach_cache(s);
	op = (struct order_params){
		.kind = s->c.order,
		.seed = s->c.seed,
		.rank = s->c.rank,
		.world = s->c.world ? s->c.world : 1,
		.batch_size = s->lay.batch_size,
		.drop_last = s->c.drop_last,
		.pad = s->c.pad,
		.nshards = s->ds->nshards,
		.shard_records = counts,
		.plan = s->plan,
		.plan_words = s->plan_words,
	};
	err = order_open(s, &op, d);
	free(counts);
	return err;
}

/*
 * The stream's order of op (its dataset's, or its mixture's places),
 * planned anew when it goes on from another world, the layout's counts
 * from it, and where the stream starts.
 */
static int order_open(struct stream *s, struct order_params *op, struct diag *d)
{
	int err = 0;

	if (s->c.from_world)
		err = replan(s, op, d);
	if (!err)
		err = order_new(&s->order, op, d);
	if (err)
		return err;
	s->lay.batches_per_epoch = order_batches(s->order);
	s->lay.samples = order_size(s->order);
	order_schedule(s->order, &s->lay.sched);
	if (s->c.from_world)
		s->c.start_batch = 0;
	if (s->c.start_batch && s->c.start_batch >= s->lay.batches_per_epoch)
		return diag_set(d, LOADER_EUSAGE,
				"start batch %" PRIu64
				" of an epoch of %" PRIu64 " batches",
				s->c.start_batch, s->lay.batches_per_epoch);
	return plan_start(s, d);
}

/*
 * Resume from the ranks of another world (stream_config.from_world):
 * the plan that deals what they left to this world replaces the one
 * given, in op and in the stream (which keeps it).
 */
static int replan(struct stream *s, struct order_params *op, struct diag *d)
{
	struct order_params old = *op;
	struct order *o;
	uint32_t from;
	int err;

	if (s->c.from_world > STREAM_MAX_WORLD || !s->c.from_epoch ||
	    !s->c.from_batch)
		return diag_set(d, LOADER_EUSAGE,
				"resume from world %" PRIu32
				": positions missing or world too large",
				s->c.from_world);
	old.rank = 0;
	old.world = s->c.from_world;
	err = order_new(&o, &old, d);
	if (err)
		return err;
	free(s->plan);
	s->plan = NULL;
	s->plan_words = 0;
	err = order_replan(o, s->c.from_epoch, s->c.from_batch, &s->plan,
			   &s->plan_words, &from, d);
	order_free(o);
	if (err)
		return err;
	if (from != s->c.start_epoch)
		return diag_set(d, LOADER_EUSAGE,
				"resume from world %" PRIu32
				": starts at epoch %" PRIu32 ", not %" PRIu32,
				s->c.from_world, from, s->c.start_epoch);
	op->plan = s->plan;
	op->plan_words = s->plan_words;
	return 0;
}

/*
 * Start no earlier than the start epoch's first batch, and past epochs
 * whose rest deals nothing (an elastic resume may leave one).
 */
static int plan_start(struct stream *s, struct diag *d)
{
	uint32_t e = s->c.start_epoch;
	uint64_t b = s->c.start_batch;

	if (!s->lay.batches_per_epoch)
		return 0;
	order_advance(&s->lay.sched, &e, &b, 0);
	if (e == s->c.start_epoch) {
		s->c.start_batch = b;
		return 0;
	}
	if (s->c.epochs && e - s->c.start_epoch >= s->c.epochs)
		return diag_set(
			d, LOADER_EEND,
			"nothing is left to deliver before epoch %" PRIu32,
			s->c.start_epoch + s->c.epochs);
	if (s->c.epochs)
		s->c.epochs -= e - s->c.start_epoch;
	s->c.start_epoch = e;
	s->c.start_batch = b;
	return 0;
}

/* Stop s's threads' waits: theirs, and a mixture's assembler's on s. */
static void stream_halt(struct stream *s)
{
	pthread_mutex_lock(&s->lock);
	__atomic_store_n(&s->stop, true, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

void stream_free(struct stream *s)
{
	if (!s)
		return;
	if (s->started) {
		pthread_mutex_lock(&s->lock);
		__atomic_store_n(&s->stop, true, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		/* A mixture's assembler may be waiting for a member's batch. */
		for (uint32_t m = 0; m < s->nmembers; m++)
			stream_halt(s->member[m]);
		/* The assembler may be waiting in the sink for a free place. */
		if (s->run_assembler)
			s->sink.ops->cancel(s->sink.ctx);
		if (s->run_reader)
			pthread_join(s->reader, NULL);
		if (s->run_assembler)
			pthread_join(s->assembler, NULL);
	}
	for (uint32_t m = 0; s->member && m < s->nmembers; m++)
		stream_free(s->member[m]);
	free(s->member);
	free(s->delivered);
	free(s->member_label);
	mixture_free(s->mix);
	mixture_free(s->later_mix);
	for (int k = 0; k < 2; k++) {
		mixture_free(s->vmixes[k]);
		order_free(s->seqs[k]);
	}
	free(s->vbuf);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->bad_lock);
	for (uint32_t i = 0; s->codec && i < s->nworkers; i++)
		codec_ctx_free(s->codec[i]);
	for (uint32_t i = 0; s->scratch && i < s->nworkers; i++)
		free(s->scratch[i]);
	for (uint32_t i = 0; s->ws && i < s->nworkers; i++)
		imgpipe_ws_free(s->ws[i]);
	free(s->codec);
	free(s->scratch);
	free(s->ws);
	free(s->wt);
	free(s->bad);
	free(s->rep);
	free(s->mixlab);
	free(s->roff);
	free(s->roff2);
	free(s->rbig);
	free(s->rbig_size);
	imgpipe_free(s->ep_pipe);
	imgpipe_free(s->pipe);
	for (uint32_t i = 0; s->pb && i < s->npb; i++) {
		free(s->pb[i].rec);
		free(s->pb[i].len);
		free(s->pb[i].gidx);
		free(s->pb[i].shard);
		free(s->pb[i].ridx);
		free(s->pb[i].rerr);
		free(s->pb[i].cached);
		free(s->pb[i].pos);
		free(s->pb[i].sseed);
	}
	free(s->pb);
	free(s->refs);
	free(s->ext);
	free(s->rq);
	free(s->arena);
	/* The threads are gone: nothing points into the set any more. */
	nodecache_detach(s->cset);
	order_free(s->order);
	free(s->plan);
	for (uint32_t i = 0; s->sh && s->ds && i < s->ds->nshards; i++)
		shard_close(s->sh[i]);
	for (uint32_t i = 0; s->wix && s->ds && i < s->ds->nshards; i++)
		recindex_free(s->wix[i]);
	free(s->wix);
	free(s->sh);
	dataset_free(s->ds);
	for (uint32_t i = 0; i < s->nfds; i++)
		close(s->fds[i]);
	free(s->fds);
	s3read_free(s->c.s3read);
	s3fill_cancel(s->c.s3fill);
	s3fill_put(s->c.s3fill);
	shardid_free(s->c.shard_ids);
	free(s);
}

/* ------------------------------------------------------------ mixtures */

/* A member's arena before its share of the mixture is known. */
#define MEMBER_ARENA_MIN (1u << 20)

/* "u8 [3, 224, 224]": a sample of output t, for messages. */
static void tensor_text(const struct stream_tensor *t, char *buf, size_t n)
{
	int at = snprintf(buf, n, "%s [", dtype_name(t->dtype));

	for (uint32_t i = 0; i < t->ndim && at > 0 && (size_t)at < n; i++)
		at += t->ragged && !i ?
			      snprintf(buf + at, n - at, "%s*", i ? ", " : "") :
			      snprintf(buf + at, n - at, "%s%" PRIu64,
				       i ? ", " : "", t->shape[i]);
	if (at > 0 && (size_t)at < n)
		snprintf(buf + at, n - at, "]");
}

void stream_member_drop(const struct stream_member *mb)
{
	for (uint32_t i = 0; i < mb->nfds; i++)
		close(mb->fds[i]);
	s3read_free(mb->s3read);
	s3fill_cancel(mb->s3fill);
	s3fill_put(mb->s3fill);
	shardid_free(mb->shard_ids);
}

/*
 * Member m of mixture c, as a stream of its own dataset that will only
 * read (its reader thread) and decode (on the mixture's assembler): its
 * own order, sequential for world 1, serves to locate its samples.
 */
static int member_new(struct stream **out, const struct stream_config *c,
		      uint32_t m, struct pool *pool, const char *label,
		      struct diag *d)
{
	const struct stream_member *mb = &c->members[m];
	struct stream_config mc = *c;

	mc.nmembers = 0;
	mc.members = NULL;
	mc.epoch_size = 0;
	mc.counts_from = 0;
	mc.before = NULL;
	mc.tar = mb->tar;
	mc.lmdb = mb->lmdb;
	mc.tar_labels = mb->tar_labels;
	mc.s3read = mb->s3read;
	mc.s3fill = mb->s3fill;
	mc.shard_ids = mb->shard_ids;
	mc.origin = mb->origin;
	mc.pipeline = mb->pipeline ? mb->pipeline : c->pipeline;
	mc.order = ORDER_SEQUENTIAL;
	mc.rank = 0;
	mc.world = 1;
	mc.plan = NULL;
	mc.plan_words = 0;
	mc.from_world = 0;
	mc.from_epoch = NULL;
	mc.from_batch = NULL;
	mc.start_epoch = 0;
	mc.start_batch = 0;
	mc.epochs = 0;
	/* Resized to its share once the mixture's counts are known. */
	mc.prefetch_bytes = MEMBER_ARENA_MIN;
	mc.label = label;
	return stream_new(out, &mc, mb->fds, mb->nfds, pool, d);
}

/*
 * Member m's outputs must be member 0's: names, dtypes and shapes. The
 * refusal names the member, the output and both shapes.
 */
static int member_agrees(const struct stream *s, uint32_t m, struct diag *d)
{
	const struct stream_layout *a = &s->member[0]->lay;
	const struct stream_layout *b = &s->member[m]->lay;

	if (a->noutputs != b->noutputs)
		return diag_set(d, LOADER_EUSAGE,
				"member %" PRIu32 " (%s) has %" PRIu32
				" outputs, member 0 (%s) %" PRIu32,
				m, s->member_label[m], b->noutputs,
				s->member_label[0], a->noutputs);
	for (uint32_t k = 0; k < a->noutputs; k++) {
		const struct stream_tensor *x = &a->out[k], *y = &b->out[k];
		char xs[96], ys[96];

		if (!strcmp(x->name, y->name) && x->dtype == y->dtype &&
		    x->ndim == y->ndim &&
		    !memcmp(x->shape, y->shape, sizeof(x->shape)) &&
		    x->ragged == y->ragged)
			continue;
		tensor_text(x, xs, sizeof(xs));
		tensor_text(y, ys, sizeof(ys));
		return diag_set(
			d, LOADER_EUSAGE,
			"member %" PRIu32 " (%s): output %" PRIu32
			" is %s %s, but member 0 (%s) gives %s %s: the members of a mixture must give the same outputs",
			m, s->member_label[m], k, y->name, ys,
			s->member_label[0], x->name, xs);
	}
	return 0;
}

/* Member m's share of total bytes, as mx's epoch gives it samples. */
static uint64_t share(const struct mixture *mx, uint32_t m, uint64_t total)
{
	return (uint64_t)((double)total * (double)mixture_count(mx, m) /
			  (double)mixture_size(mx));
}

/*
 * What a mixture holds beside its ring, counted before its members'
 * copies of the plan are made: each member's arena, resized to its share
 * of the prefetch budget as the epoch gives it samples (at least room
 * for a whole batch of its largest records, within the budget, so that
 * any batch fits), its scratch and indexes; and n + 1 copies of the plan
 * and of the order over the epoch's blocks (their sizes and starts, the
 * quasi order's block order), which a client's counts make large.
 * Refused above max_mem, with the parts named.
 */
static int mixture_memory(struct stream *s, const struct stream_config *c,
			  struct diag *d)
{
	uint64_t total =
		c->prefetch_bytes ? c->prefetch_bytes : STREAM_DEFAULT_PREFETCH;
	uint64_t members = 0, meta, shares = 0;
	uint64_t part[MIXTURE_MAX_MEMBERS];
	const uint64_t *blocks;
	uint64_t nb = mixture_blocks(s->mix, &blocks);

	if (s->later_mix)
		nb += mixture_blocks(s->later_mix, &blocks);
	meta = (uint64_t)(s->nmembers + 1) * nb *
	       (c->order == ORDER_QUASI ? 28 : 16);
	/*
	 * Counts that change: each member the larger of its two shares,
	 * all of them scaled back into the budget.
	 */
	for (uint32_t m = 0; m < s->nmembers; m++) {
		uint64_t later =
			s->later_mix ? share(s->later_mix, m, total) : 0;

		part[m] = share(s->mix, m, total);
		if (later > part[m])
			part[m] = later;
		shares += part[m];
	}
	for (uint32_t m = 0; shares > total && m < s->nmembers; m++)
		part[m] = (uint64_t)((double)part[m] * (double)total /
				     (double)shares);
	for (uint32_t m = 0; m < s->nmembers; m++) {
		struct stream *ms = s->member[m];
		uint64_t want = part[m];
		uint64_t floor =
			(largest_record(ms) + 2 * STREAM_DIRECT_ALIGN) *
			s->lay.batch_size;
		uint64_t size;

		if (floor > total)
			floor = total;
		if (want < floor)
			want = floor;
		if (want < MEMBER_ARENA_MIN)
			want = MEMBER_ARENA_MIN;
		size = arena_bytes(ms, want);
		if (size != ms->arena_size) {
			ms->lay.mem_bytes -= ms->arena_size;
			free(ms->arena);
			ms->arena_size = size;
			alloc_arena(ms);
			if (!ms->arena)
				return diag_set(d, -ENOMEM,
						"prefetch of %" PRIu64
						" bytes for member %" PRIu32,
						size, m);
			ms->lay.mem_bytes += size;
		}
		members += ms->lay.mem_bytes;
		s->lay.index_bytes += ms->lay.index_bytes;
	}
	s->lay.mem_bytes = members + meta;
	if (c->max_mem && s->lay.mem_bytes > c->max_mem)
		return diag_set(
			d, LOADER_ETOOBIG,
			"the mixture would hold %" PRIu64
			" bytes beside its ring (its %" PRIu32
			" members' prefetch, decode scratch and shard indexes %" PRIu64
			", its plan and orders over %" PRIu64 " blocks %" PRIu64
			"), more than the %" PRIu64 " %s",
			s->lay.mem_bytes, s->nmembers, members, nb, meta,
			c->max_mem,
			c->max_mem_why ? c->max_mem_why : "allowed");
	return 0;
}

/* The members' mixture_params with weights w (mm: every member's shards). */
static struct mixture_params weigh(const struct stream_config *c,
				   struct mixture_member *mm,
				   const struct mixture_weights *w)
{
	for (uint32_t m = 0; m < c->nmembers; m++) {
		mm[m].how = w->how[m];
		mm[m].value = w->value[m];
	}
	return (struct mixture_params){ .nmembers = c->nmembers,
					.m = mm,
					.epoch_size = w->epoch_size,
					.seed = c->seed,
					.quasi = c->order == ORDER_QUASI };
}

/*
 * Counts that change at c->counts_from: the mixture's order of the
 * epochs from there on (op, its blocks those of s->later_mix), for each
 * member, and the schedule's count of batches. The plan and the old
 * world's positions, which the earlier counts deal, must lie before it.
 */
static int later_open(struct stream *s, const struct stream_config *c,
		      struct order_params op, struct diag *d)
{
	const uint64_t *blocks;
	uint64_t n;
	int err;

	/* A rank at the change's first batch has not begun its epoch. */
	for (uint32_t r = 0; r < c->from_world; r++)
		if (c->from_epoch[r] > c->counts_from ||
		    (c->from_epoch[r] == c->counts_from && c->from_batch[r]))
			return diag_set(
				d, LOADER_EUSAGE,
				"the counts change at epoch %" PRIu32
				", and rank %" PRIu32 " of world %" PRIu32
				" stopped in epoch %" PRIu32
				" while another stopped before it: go on with world %" PRIu32
				" until every rank has begun epoch %" PRIu32,
				c->counts_from, r, c->from_world,
				c->from_epoch[r], c->from_world,
				c->counts_from);
	if (s->lay.sched.n &&
	    s->lay.sched.epoch[s->lay.sched.n - 1] >= c->counts_from)
		return diag_set(
			d, LOADER_EUSAGE,
			"the counts change at epoch %" PRIu32
			", and the plan of an earlier world's rest deals epoch %" PRIu32,
			c->counts_from, s->lay.sched.epoch[s->lay.sched.n - 1]);
	op.plan = NULL;
	op.plan_words = 0;
	op.nshards = mixture_blocks(s->later_mix, &blocks);
	op.shard_records = blocks;
	for (uint32_t m = 0; m < s->nmembers; m++) {
		err = order_new(&s->member[m]->seqs[1], &op, d);
		if (err)
			return err;
	}
	n = order_batches(s->member[0]->seqs[1]);
	if (!n || !s->lay.batches_per_epoch)
		return diag_set(d, LOADER_EUSAGE,
				"the counts %s epoch %" PRIu32
				" deal rank %" PRIu32 " no batch an epoch",
				n ? "before" : "from", c->counts_from, op.rank);
	s->lay.sched.later_from = c->counts_from;
	s->lay.sched.later_batches = n;
	/*
	 * The plan's last epochs may deal this rank nothing, and move its
	 * start onto the change (plan_start()): the start's count is then
	 * the later one.
	 */
	if (s->c.start_epoch >= c->counts_from)
		s->lay.batches_per_epoch = n;
	return 0;
}

/*
 * Its members' layouts, then the mixture's order over their epochs (and
 * over those from c->counts_from, where the counts change).
 */
static int mixture_open(struct stream *s, const struct stream_config *c,
			struct diag *d)
{
	struct mixture_member mm[MIXTURE_MAX_MEMBERS] = { { 0 } };
	uint64_t *counts[MIXTURE_MAX_MEMBERS] = { 0 };
	struct mixture_weights now = { .n = c->nmembers,
				       .epoch_size = c->epoch_size };
	const struct mixture_weights *first = &now;
	struct mixture_params mp;
	struct order_params op;
	const uint64_t *blocks;
	uint32_t n = c->nmembers;
	bool later = c->counts_from > c->start_epoch;
	int err = 0;

	for (uint32_t m = 0; m < n; m++) {
		now.how[m] = c->members[m].how;
		now.value[m] = c->members[m].value;
	}
	if (later)
		first = c->before;
	s->later_from = later ? c->counts_from : 0;
	for (uint32_t m = 0; m < n && !err; m++) {
		struct stream *ms = s->member[m];

		counts[m] = mem_calloc(ms->ds->nshards ? ms->ds->nshards : 1,
				       sizeof(uint64_t));
		if (!counts[m]) {
			err = -ENOMEM;
			break;
		}
		for (uint32_t i = 0; i < ms->ds->nshards; i++)
			counts[m][i] = shard_count(ms->sh[i]);
		mm[m] = (struct mixture_member){
			.nshards = ms->ds->nshards,
			.shard_records = counts[m],
		};
	}
	mp = weigh(c, mm, first);
	if (!err)
		err = mixture_new(&s->mix, &mp, d);
	if (!err && later) {
		mp = weigh(c, mm, &now);
		err = mixture_new(&s->later_mix, &mp, d);
		if (err)
			diag_wrap(d, err, "from epoch %" PRIu32,
				  c->counts_from);
	}
	if (!err)
		err = mixture_memory(s, c, d);
	for (uint32_t m = 0; !err && m < n; m++) {
		struct stream *ms = s->member[m];

		mp = weigh(c, mm, first);
		err = mixture_new(&ms->vmixes[0], &mp, d);
		if (!err && later) {
			mp = weigh(c, mm, &now);
			err = mixture_new(&ms->vmixes[1], &mp, d);
		}
		ms->later_from = s->later_from;
		ms->vmix = ms->vmixes[0];
	}
	for (uint32_t m = 0; m < n; m++)
		free(counts[m]);
	if (err)
		return err;
	op = (struct order_params){
		.kind = c->order,
		.seed = c->seed,
		.rank = c->rank,
		.world = c->world ? c->world : 1,
		.batch_size = s->lay.batch_size,
		.drop_last = c->drop_last,
		.pad = c->pad,
		.plan = s->plan,
		.plan_words = s->plan_words,
	};
	op.nshards = mixture_blocks(s->mix, &blocks);
	op.shard_records = blocks;
	err = order_open(s, &op, d);
	if (!err && later)
		err = later_open(s, c, op, d);
	/* Each member's reader walks the mixture's batches as s does. */
	for (uint32_t m = 0; !err && m < n; m++) {
		struct stream *ms = s->member[m];

		err = order_new(&ms->seqs[0], &op, d);
		if (err)
			break;
		ms->seq = ms->seqs[0];
		ms->member_no = m;
		ms->vbuf = mem_calloc(s->lay.batch_size, sizeof(uint64_t));
		if (!ms->vbuf)
			return -ENOMEM;
		for (uint32_t i = 0; i < ms->npb; i++) {
			ms->pb[i].pos =
				mem_calloc(s->lay.batch_size, sizeof(uint32_t));
			ms->pb[i].sseed =
				mem_calloc(s->lay.batch_size, sizeof(uint64_t));
			if (!ms->pb[i].pos || !ms->pb[i].sseed)
				return -ENOMEM;
		}
		ms->lay.batches_per_epoch = s->lay.batches_per_epoch;
		ms->lay.samples = s->lay.samples;
		ms->lay.sched = s->lay.sched;
		ms->c.start_epoch = s->c.start_epoch;
		ms->c.start_batch = s->c.start_batch;
		ms->c.epochs = s->c.epochs;
	}
	return err;
}

/*
 * A mixture (stream_config.members): a stream per member, each with its
 * dataset, pipeline, reader and prefetch (the budget shared in equal
 * parts), and this one, which owns the mixture's order and assembles
 * every batch from them (mixture_main()).
 */
static int stream_new_mixture(struct stream *s, const struct stream_config *c,
			      struct diag *d)
{
	uint32_t n = c->nmembers;
	int err = 0;

	s->member = mem_calloc(n, sizeof(*s->member));
	s->delivered = mem_calloc(n, sizeof(*s->delivered));
	s->member_label = mem_calloc(n, sizeof(*s->member_label));
	if (!s->member || !s->delivered || !s->member_label) {
		for (uint32_t m = 0; m < n; m++)
			stream_member_drop(&c->members[m]);
		return diag_set(d, -ENOMEM, "out of memory");
	}
	for (uint32_t m = 0; m < n; m++) {
		char label[160];

		snprintf(s->member_label[m], sizeof(s->member_label[m]), "%s",
			 c->members[m].label && c->members[m].label[0] ?
				 c->members[m].label :
				 "(unnamed)");
		if (err) {
			stream_member_drop(&c->members[m]);
			continue;
		}
		snprintf(label, sizeof(label), "%s: member %" PRIu32, s->label,
			 m);
		err = member_new(&s->member[m], c, m, s->pool, label, d);
		if (err) {
			diag_wrap(d, err, "member %" PRIu32 " (%s)", m,
				  s->member_label[m]);
			continue;
		}
		s->nmembers = m + 1;
		if (s->member[m]->mixing || s->member[m]->nragged)
			err = diag_set(
				d, LOADER_EUSAGE,
				"member %" PRIu32
				" (%s): %s are not mixed yet: a mixture's batches have neither",
				m, s->member_label[m],
				s->member[m]->mixing ?
					"the batch stages (mixup, cutmix, label_smoothing)" :
					"ragged outputs");
		if (!err && m)
			err = member_agrees(s, m, d);
	}
	if (err)
		return err;
	/*
	 * Every member's outputs plain copies, and the batch small: the
	 * mixture's assembler gathers them alone (stream_priv.h, light).
	 */
	s->light = true;
	for (uint32_t m = 0; m < n; m++)
		s->light = s->light && s->member[m]->light;
	s->lay.noutputs = s->member[0]->lay.noutputs;
	memcpy(s->lay.out, s->member[0]->lay.out, sizeof(s->lay.out));
	s->lay.nmembers = n;
	err = mixture_open(s, c, d);
	if (err)
		return err;
	s->bad = mem_calloc(s->lay.batch_size, 1);
	s->rep = mem_calloc(s->lay.batch_size, sizeof(*s->rep));
	if (!s->bad || !s->rep)
		return diag_set(d, -ENOMEM, "out of memory");
	return 0;
}

/* A mixture stream_new() will not open: its members dropped. */
static void members_drop(const struct stream_config *c)
{
	for (uint32_t m = 0; c->members && m < c->nmembers; m++)
		stream_member_drop(&c->members[m]);
}

int stream_new(struct stream **out, const struct stream_config *c, int *fds,
	       uint32_t nfds, struct pool *pool, struct diag *d)
{
	struct stream *s = mem_calloc(1, sizeof(*s));
	int err;

	if (!s) {
		for (uint32_t i = 0; i < nfds; i++)
			close(fds[i]);
		members_drop(c);
		s3read_free(c->s3read);
		s3fill_cancel(c->s3fill);
		s3fill_put(c->s3fill);
		shardid_free(c->shard_ids);
		return diag_set(d, -ENOMEM, "out of memory");
	}
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->bad_lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->fds = mem_alloc((nfds ? nfds : 1) * sizeof(int));
	s->c.s3read = c->s3read;       /* stream_free() frees it */
	s->c.s3fill = c->s3fill;       /* and drops this */
	s->c.shard_ids = c->shard_ids; /* and frees this */
	/* A read in place in flight when the stream stops ends then. */
	if (s->c.s3read)
		s3read_set_cancel(s->c.s3read, &s->stop);
	if (!s->fds) {
		for (uint32_t i = 0; i < nfds; i++)
			close(fds[i]);
		members_drop(c);
		stream_free(s);
		return diag_set(d, -ENOMEM, "out of memory");
	}
	if (nfds) /* a mixture has none of its own (fds NULL) */
		memcpy(s->fds, fds, nfds * sizeof(int));
	s->nfds = nfds;
	s->c = *c;
	/* Pointers of the caller's: used here only, not kept. */
	s->c.pipeline = NULL;
	s->c.label = NULL;
	s->c.plan = NULL;
	s->c.origin = NULL;
	if (c->plan && c->plan_words) {
		s->plan = mem_alloc(c->plan_words * sizeof(uint64_t));
		if (!s->plan) {
			members_drop(c);
			stream_free(s);
			return diag_set(d, -ENOMEM, "out of memory");
		}
		memcpy(s->plan, c->plan, c->plan_words * sizeof(uint64_t));
		s->plan_words = c->plan_words;
	}
	s->pool = pool;
	snprintf(s->label, sizeof(s->label), "%s", c->label ? c->label : "");
	s->lay.batch_size =
		c->batch_size ? c->batch_size : STREAM_DEFAULT_BATCH;
	err = stream_config_check(c, d);
	if (c->nmembers) {
		/* The members' stores are theirs: nothing here to free. */
		s->c.s3read = NULL;
		s->c.s3fill = NULL;
		s->c.shard_ids = NULL;
		s->c.members = NULL;
		if (err)
			members_drop(c);
		else
			err = stream_new_mixture(s, c, d);
		goto done;
	}
	if (!err)
		err = setup_pipeline(s, c->pipeline, c->max_pixels, d);
	if (!err)
		err = open_dataset(s, c->origin, d);
	if (!err)
		err = setup_outputs(s, d);
	if (!err)
		err = setup_batch(s, d);
	if (!err) {
		s->light = light_outputs(s);
		fixed_layout(s);
	}
	if (!err)
		err = plan_memory(s, d);
	if (!err)
		err = setup_prefetch(s, d);
	if (!err)
		err = setup_workers(s);
done:
	s->c.from_epoch = NULL;
	s->c.from_batch = NULL;
	s->c.max_mem_why = NULL;
	if (err) {
		if (err == -ENOMEM && !d->msg[0])
			diag_set(d, err, "out of memory");
		stream_free(s);
		return err;
	}
	*out = s;
	return 0;
}

const struct stream_layout *stream_layout(const struct stream *s)
{
	return &s->lay;
}

void stream_begins(const struct stream *s, uint32_t *epoch, uint64_t *batch,
		   uint32_t *epochs)
{
	*epoch = s->c.start_epoch;
	*batch = s->c.start_batch;
	*epochs = s->c.epochs;
}

void stream_plan(const struct stream *s, const uint64_t **plan, size_t *words)
{
	*plan = s->plan;
	*words = s->plan_words;
}

void stream_stats(const struct stream *s, struct stream_stats *st)
{
	st->batches = __atomic_load_n(&s->n.batches, __ATOMIC_RELAXED);
	st->samples = __atomic_load_n(&s->n.samples, __ATOMIC_RELAXED);
	st->bytes_read = __atomic_load_n(&s->n.bytes_read, __ATOMIC_RELAXED);
	st->reads = __atomic_load_n(&s->n.reads, __ATOMIC_RELAXED);
	st->cache_hits = __atomic_load_n(&s->n.cache_hits, __ATOMIC_RELAXED);
	st->cache_misses =
		__atomic_load_n(&s->n.cache_misses, __ATOMIC_RELAXED);
	st->served = __atomic_load_n(&s->n.served, __ATOMIC_RELAXED);
	st->bad_samples = __atomic_load_n(&s->n.bad_samples, __ATOMIC_RELAXED);
	st->read_wait_ns =
		__atomic_load_n(&s->n.read_wait_ns, __ATOMIC_RELAXED);
	st->decode_ns = __atomic_load_n(&s->n.decode_ns, __ATOMIC_RELAXED);
	st->slot_wait_ns =
		__atomic_load_n(&s->n.slot_wait_ns, __ATOMIC_RELAXED);
	st->epoch = __atomic_load_n(&s->n.epoch, __ATOMIC_RELAXED);
	/* A mixture's members read, and count their bad samples. */
	for (uint32_t m = 0; m < s->nmembers; m++) {
		struct stream_stats ms;

		stream_stats(s->member[m], &ms);
		st->bytes_read += ms.bytes_read;
		st->reads += ms.reads;
		st->cache_hits += ms.cache_hits;
		st->cache_misses += ms.cache_misses;
		st->bad_samples += ms.bad_samples;
	}
}

uint32_t stream_members(const struct stream *s)
{
	return s->nmembers;
}

void stream_member_stats(const struct stream *s, uint32_t m,
			 struct stream_stats *st, const char **label,
			 uint64_t *per_epoch)
{
	stream_stats(s->member[m], st);
	st->samples = __atomic_load_n(&s->delivered[m], __ATOMIC_RELAXED);
	*label = s->member_label[m];
	*per_epoch = mixture_count(s->mix, m);
	/* Counts that changed: those of the epoch delivered last. */
	if (s->later_mix &&
	    __atomic_load_n(&s->n.epoch, __ATOMIC_RELAXED) >= s->later_from)
		*per_epoch = mixture_count(s->later_mix, m);
}

void stream_thread_cpu(const struct stream *s, uint64_t *reader_ns,
		       uint64_t *assembler_ns)
{
	*reader_ns = __atomic_load_n(&s->reader_cpu_ns, __ATOMIC_RELAXED);
	*assembler_ns = __atomic_load_n(&s->assembler_cpu_ns, __ATOMIC_RELAXED);
	/* A mixture's readers are its members'. */
	for (uint32_t m = 0; m < s->nmembers; m++)
		*reader_ns += __atomic_load_n(&s->member[m]->reader_cpu_ns,
					      __ATOMIC_RELAXED);
}

void stream_stages(const struct stream *s, struct stream_stages *t)
{
	memset(t, 0, sizeof(*t));
	/* A mixture's samples are decoded by its members' workers. */
	for (uint32_t m = 0; m < s->nmembers; m++) {
		struct stream_stages mt;

		stream_stages(s->member[m], &mt);
		t->decode_ns += mt.decode_ns;
		t->augment_ns += mt.augment_ns;
		t->emit_ns += mt.emit_ns;
	}
	if (!s->wt)
		return;
	for (uint32_t i = 0; i < s->nworkers; i++) {
		struct imgpipe_times it;

		t->decode_ns +=
			__atomic_load_n(&s->wt[i].decode_ns, __ATOMIC_RELAXED);
		t->emit_ns +=
			__atomic_load_n(&s->wt[i].emit_ns, __ATOMIC_RELAXED);
		if (!s->ws[i])
			continue;
		imgpipe_ws_times(s->ws[i], &it);
		t->decode_ns += it.header_ns + it.decode_ns;
		t->augment_ns +=
			it.resize_ns + it.warp_ns + it.color_ns + it.erase_ns;
		t->emit_ns += it.emit_ns;
	}
}

/*
 * A mixture's threads: each member's reader, then its assembler. Once
 * any has started, s is started: stream_free() stops and joins those
 * that run.
 */
static int mixture_start(struct stream *s, struct diag *d)
{
	int err;

	s->started = true;
	for (uint32_t m = 0; m < s->nmembers; m++) {
		struct stream *ms = s->member[m];

		err = fault_alloc() ? -EAGAIN :
				      -pthread_create(&ms->reader, NULL,
						      reader_main, ms);
		if (err)
			return diag_set(d, err,
					"reader thread of member %" PRIu32
					": %s",
					m, strerror(-err));
		ms->run_reader = true;
		ms->started = true;
	}
	err = fault_alloc() ?
		      -EAGAIN :
		      -pthread_create(&s->assembler, NULL, mixture_main, s);
	if (err)
		return diag_set(d, err, "assembler thread: %s", strerror(-err));
	s->run_assembler = true;
	return 0;
}

int stream_start(struct stream *s, const struct stream_sink *sink,
		 struct diag *d)
{
	int err;

	s->sink = *sink;
	if (s->nmembers)
		return mixture_start(s, d);
	err = fault_alloc() ? -EAGAIN :
			      -pthread_create(&s->reader, NULL, reader_main, s);
	if (err)
		return diag_set(d, err, "reader thread: %s", strerror(-err));
	err = fault_alloc() ?
		      -EAGAIN :
		      -pthread_create(&s->assembler, NULL, assembler_main, s);
	if (err) {
		pthread_mutex_lock(&s->lock);
		s->stop = true;
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->reader, NULL);
		return diag_set(d, err, "assembler thread: %s", strerror(-err));
	}
	s->run_reader = s->run_assembler = true;
	s->started = true;
	return 0;
}
