/*
 * s3ds.h - loaderctl's datasets in an S3-API object store (s3:// URLs).
 *
 * loaderctl works on local dataset directories; this module moves them
 * between such a directory and a store, so that pack, inspect and verify
 * run unchanged on a private staging directory:
 *
 *   pack:           s3ds_check_target() for each dataset it will write
 *                   (before packing: refuse early), pack into a staging
 *                   directory, s3ds_push() it, remove the directory;
 *   inspect/verify: s3ds_fetch() into a staging directory, run the local
 *                   command on it with the URL shown in place of the
 *                   directory (s3ds_subst()), remove the directory.
 *
 * s3ds_push() stores every shard first and each manifest.json last, so a
 * reader never finds a manifest whose shards are not all there yet. Over
 * a dataset already there, the new shards get names the old manifest
 * does not use (shard-TAG-NNNNN.lds), so the old dataset stays whole and
 * readable until the new manifest replaces its own; only then are the
 * old shards deleted.
 *
 * Messages name objects as s3://bucket/key; a refusal by the store (403)
 * names the access key id (never the secret), a missing bucket names the
 * bucket and the endpoint.
 *
 * A struct s3ds is used by one thread at a time; s3ds_push() makes its
 * own clients for its upload threads.
 */
#ifndef LD_S3DS_H
#define LD_S3DS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "diag.h"

/* The staging directory's parent when neither option nor $TMPDIR says. */
#define S3DS_TMP_DEFAULT "/var/tmp"

/*
 * The s3:// options of inspect and verify, for an option table (opts.h)
 * whose struct has tmp_dir, parallel and aws_profile and whose O() is
 * defined where this is used.
 */
#define S3DS_HELP_TMP                                                          \
	"s3://: fetch into a staging directory made in DIR, removed when "     \
	"done (default: $TMPDIR, else " S3DS_TMP_DEFAULT ")"
#define S3DS_HELP_PROFILE                                                      \
	"s3://: the AWS profile whose credentials, region, endpoint and "      \
	"addressing to use (default: $AWS_PROFILE, else "                      \
	"$AWS_DEFAULT_PROFILE, else default)"
/* clang-format off */
#define S3DS_FETCH_OPTIONS                                                     \
	{ "tmp-dir", 0, OPT_STR, O(tmp_dir), NULL, "DIR", S3DS_HELP_TMP,       \
	  0, 0, 0 },                                                           \
	{ "parallel", 0, OPT_U64, O(parallel), "8", "N",                       \
	  "s3://: requests in flight at once", 1, 64, 0 },                     \
	{ "aws-profile", 0, OPT_STR, O(aws_profile), NULL, "NAME",             \
	  S3DS_HELP_PROFILE, 0, 0, 0 }
/* clang-format on */

struct s3ds_opts {
	const char *profile; /* AWS profile; NULL: $AWS_PROFILE, else default */
	const char *tmp_dir; /* staging parent; NULL: $TMPDIR, else /var/tmp */
	unsigned parallel;   /* requests in flight at once; 0: 8 */
	uint64_t part_bytes; /* multipart above this, in such parts; 0: 64 MiB */
};

/* What a transfer moved. */
struct s3ds_xfer {
	uint64_t objects, bytes;
	uint64_t requests, retries;
	double seconds;
	/*
	 * s3ds_push() over a dataset already there: the shards of the
	 * replaced dataset deleted, and those left (named by nothing), with
	 * why the first was.
	 */
	uint64_t removed, left;
	char why[DIAG_MAX];
};

struct s3ds;

/*
 * libcurl's global state, once per process before any thread starts
 * (loaderctl's main). Later calls return the first one's result.
 * Returns 0 or -ENOMEM.
 */
int s3ds_global_init(void);

/*
 * Resolve the store and credentials (common/awscfg.h) for url
 * ("s3://BUCKET[/PREFIX]") and make a client. o may be NULL; its strings
 * are borrowed until s3ds_free(). Returns 0 or a negative code with d
 * saying why (a bad URL, a bad AWS setting).
 */
int s3ds_open(struct s3ds **out, const char *url, const struct s3ds_opts *o,
	      struct diag *d);

/* Free s and wipe its credentials. NULL is a no-op. */
void s3ds_free(struct s3ds *s);

/* The URL, normalised ("s3://bucket" or "s3://bucket/prefix"). */
const char *s3ds_url(const struct s3ds *s);

/*
 * Make a new private staging directory (mode 0700) under the staging
 * parent: its path into dir (n bytes). Returns 0 or -errno, naming the
 * parent (and the option that chooses another) in d.
 */
int s3ds_stage(const struct s3ds *s, char *dir, size_t n, struct diag *d);

/* Remove dir and everything under it. NULL or "" is a no-op. */
void s3ds_unstage(const char *dir);

/*
 * Before a pack into PREFIX[/sub] (sub NULL or "": the prefix itself):
 * fails with -EEXIST when a manifest.json is there already and force is
 * false, with -ENOENT when the bucket does not exist, -EACCES when the
 * store refuses the credentials.
 */
int s3ds_check_target(struct s3ds *s, const char *sub, bool force,
		      struct diag *d);

/*
 * Store the n datasets dir/subs[i] (subs[i] "" for dir itself) as
 * PREFIX[/subs[i]]: the shards their manifests name, up to the parallel
 * count at once, then, once every shard is stored, the manifests. A
 * progress bar (bytes and objects) is drawn on stderr when it is a
 * terminal. x gets what was stored. On failure no manifest is stored
 * unless every shard was, and d names the object at fault; a dataset
 * that was there stays as it was (only shards it does not name were
 * stored). A dataset in dir whose target holds one already has its
 * shards renamed in dir first (see above). Without force, a target that
 * holds a dataset now (one stored while this one was packed) fails the
 * push with -EEXIST before anything is stored.
 */
int s3ds_push(struct s3ds *s, const char *dir, const char *const *subs,
	      size_t n, bool force, struct s3ds_xfer *x, struct diag *d);

/* A dataset (or one object) fetched into a staging directory. */
struct s3ds_got {
	struct s3ds *s;	      /* NULL when the open failed */
	char stage[PATH_MAX]; /* the staging directory; "" until made */
	char path[PATH_MAX];  /* the local path to run the command on */
	char shown[PATH_MAX]; /* the URL to show in place of stage */
	struct s3ds_xfer x;   /* what came */
};

/*
 * What inspect and verify do first: s3ds_open(), signals caught
 * (s3ds_catch_signals()), a staging directory made (s3ds_stage()) and
 * the URL fetched into it (s3ds_fetch()). g is filled as far as it got,
 * also on failure; s3ds_got_free() undoes it all.
 */
int s3ds_get(struct s3ds_got *g, const char *url, const struct s3ds_opts *o,
	     struct diag *d);

/* Remove g's staging directory and free its client. */
void s3ds_got_free(struct s3ds_got *g);

/* One line on f: "VERB N objects, SIZE PREP URL in S s (RATE/s)". */
void s3ds_print_xfer(FILE *f, const char *verb, const char *prep,
		     const char *url, const struct s3ds_xfer *x);

/*
 * s with every occurrence of from replaced by to, into out (n bytes,
 * always terminated; cut if it is too short). With from NULL or "", s
 * as it is. Returns out.
 */
const char *s3ds_subst(char *out, size_t n, const char *s, const char *from,
		       const char *to);

/*
 * Catch SIGINT, SIGTERM and SIGHUP once: the first sets a flag that the
 * transfers and the caller's loops poll, so that they stop and remove
 * their staging directory; a second one kills as usual.
 */
void s3ds_catch_signals(void);

/* Whether a signal caught by s3ds_catch_signals() came. */
bool s3ds_interrupted(void);

/*
 * If a signal was caught, raise it again with its default action (after
 * the caller has cleaned up), so that the exit status says so.
 */
void s3ds_reraise(void);

#endif /* LD_S3DS_H */
