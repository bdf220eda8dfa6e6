/*
 * imgwrite.h - an 8-bit RGB image encoded as PNG (libpng) or JPEG
 * (libjpeg-turbo, quality 95), chosen by a file name's extension: for
 * people to look at (loaderctl pipeline --grid), not for datasets. The
 * bytes come back in memory, for the caller to write as it writes its
 * other files.
 */
#ifndef LD_IMGWRITE_H
#define LD_IMGWRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"

/* Does name end in ".png", ".jpg" or ".jpeg" (any case)? */
bool imgwrite_named(const char *name);

/*
 * Encode w x h RGB pixels (rows of w * 3 bytes, back to back) as name's
 * extension says: *out (the caller frees it), *len bytes. Returns 0,
 * LOADER_EUSAGE for another extension, or a negative code with d naming
 * name.
 */
int imgwrite_encode(const char *name, const uint8_t *rgb, uint32_t w,
		    uint32_t h, void **out, size_t *len, struct diag *d);

#endif /* LD_IMGWRITE_H */
