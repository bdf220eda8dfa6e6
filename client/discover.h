/*
 * discover.h - find a dataset's files and send them to loaderd over the
 * handle's connection, before its OPEN.
 *
 * Internal to libloader. Both functions work on a connected handle
 * (libloader_priv.h) after HELLO, send with its next sequence numbers,
 * and return 0 or a negative code with the reason in l->reason.
 */
#ifndef LOADER_DISCOVER_H
#define LOADER_DISCOVER_H

#include <stdbool.h>
#include <stdint.h>

#include "loader.h"

/*
 * Send the dataset: for an s3:// URL one REMOTE message (the caller's
 * credentials resolved here, *flags = PROTO_OPEN_REMOTE); else file 0
 * (manifest.json, or for .tar files and LMDB their names) and the shards
 * in FILES messages of at most l->max_fds descriptors, opened with the
 * caller's permissions. dataset is a directory made by loaderctl pack,
 * a directory of .tar files or an LMDB environment, or one .tar or LMDB
 * data file (*flags = PROTO_OPEN_TAR or PROTO_OPEN_LMDB for those, else
 * 0). *first_seq gets the sequence number of the first message sent:
 * the OPEN's reply wait takes a PROTO_ERROR to any of them. No
 * descriptor stays open here on return.
 */
int loader_send_files(struct loader *l, const char *dataset,
		      uint32_t *first_seq, uint32_t *flags);

/*
 * Send a mixture's members (libloader_priv.h: l->nmembers, l->pm,
 * l->mpath), each as loader_send_files() sends a dataset, then its
 * MEMBER (l->pm[i], whose flags it sets from what the files are). A
 * member that is itself a mixture file is refused (LOADER_EUSAGE):
 * mixtures do not nest. A failure's reason begins with the mixture's
 * name (l->dataset, if any) and "member I: ".
 * *first_seq and *remote (some member is an s3:// dataset) as
 * loader_send_files()'s.
 */
int loader_send_members(struct loader *l, uint32_t *first_seq, bool *remote);

/*
 * Send where the ranks of o's earlier world stopped (o->from_world,
 * from_epoch[], from_batch[], from_plan, from_plan_end) in POSITIONS
 * messages, in rank order.
 */
int loader_send_positions(struct loader *l, const struct loader_opts *o);

#endif /* LOADER_DISCOVER_H */
