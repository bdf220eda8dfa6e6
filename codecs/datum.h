/*
 * datum.h - Caffe's Datum, the protocol-buffer message that ImageNet
 * LMDBs made by Caffe's convert_imageset hold as their values:
 *
 *   message Datum {
 *     optional int32 channels = 1; optional int32 height = 2;
 *     optional int32 width = 3;    optional bytes data = 4;
 *     optional int32 label = 5;    repeated float float_data = 6;
 *     optional bool encoded = 7;
 *   }
 *
 * data is the encoded image (a JPEG) when encoded is set, else the
 * pixels, channels x height x width bytes. Parsing checks every length
 * against the buffer; unknown fields are skipped as protobuf says.
 */
#ifndef LD_DATUM_H
#define LD_DATUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"

struct datum {
	int64_t channels, height, width, label;
	const unsigned char *data; /* into the parsed buffer; NULL if absent */
	size_t data_len;
	size_t nfloats; /* float_data values (not kept) */
	bool encoded;
	bool has_label;
};

/*
 * Parse buf[0..len) as a Datum into *out (pointers into buf). Returns 0,
 * or LOADER_EFORMAT with the offset and what is wrong in d.
 */
int datum_parse(const void *buf, size_t len, struct datum *out, struct diag *d);

#endif /* LD_DATUM_H */
