/*
 * ringcheck.h - the client's check of the ring header that loaderd
 * wrote (ring.h): the trust boundary between the daemon's memory and
 * libloader. Every offset, size and shape that libloader later uses to
 * read a slot is checked here once, and the outputs' layout is kept in
 * struct loader_output, never read from the ring again.
 *
 * Internal to libloader: compiled into it but not exported (the library
 * is built with -fvisibility=hidden); the unit tests compile ringcheck.c
 * directly. It needs no mapping: the header is a plain struct.
 */
#ifndef LOADER_RINGCHECK_H
#define LOADER_RINGCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "ring.h"

/* One output, as checked at open time: never read from the ring again. */
struct loader_output {
	char name[PROTO_NAME_MAX];
	uint32_t dtype;
	uint32_t ndim;
	uint64_t shape[RING_MAX_DIMS];
	uint64_t offset; /* in a slot */
	uint64_t sample_bytes;
	/* A ragged output: its offsets in a slot, and the room for values. */
	bool ragged;
	uint64_t index, room, row;
};

/*
 * Check ring header *h, for a ring of ring_bytes bytes (the mapping's
 * size, at least RING_PAGE) opened with request *po and nmembers members
 * (0: one dataset): its magic and version; its size and the slots'
 * place; slot_count a power of two and slot_size a multiple of
 * RING_ALIGN, the slots within ring_bytes; the batch size and outputs
 * asked for; the sample ids and every output (dtype, shape, bytes,
 * offsets; a ragged output's row, offsets and room apart) aligned and
 * inside a slot; and for a mixture (RING_MIXTURE, and only then) the
 * members asked for, each sample's member (a u32) aligned, inside a
 * slot and clear of the ids and every output. Only the fields before
 * `prod` are read: the caller copies those from the shared header
 * first.
 *
 * Returns 0 with out[0..h->noutputs - 1] (out has room for
 * PROTO_MAX_OUTPUTS) filled in; or LOADER_EVERSION (another ring
 * version) or LOADER_EPROTO, with the reason in why (whylen bytes, may
 * be 0) and out partly written.
 */
int loader_check_hdr(const struct ring_hdr *h, size_t ring_bytes,
		     const struct proto_open *po, uint32_t nmembers,
		     struct loader_output *out, char *why, size_t whylen);

/*
 * Check the shape a slot gives output o for a batch of count samples
 * (ring.h, struct ring_slot): shape[0] is count and every sample
 * dimension of a plain output is 1..o's (a ragged output's slot shape
 * is not used). Returns the batch's bytes of o into *bytes and 0, or
 * LOADER_EPROTO with the reason in why (whylen bytes, may be 0).
 */
int loader_check_shape(const struct loader_output *o,
		       const uint64_t shape[RING_MAX_DIMS], uint32_t count,
		       uint64_t *bytes, char *why, size_t whylen);

#endif /* LOADER_RINGCHECK_H */
