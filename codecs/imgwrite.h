/*
 * imgwrite.h - an 8-bit RGB image written to a file as PNG (libpng) or
 * JPEG (libjpeg-turbo, quality 95), by the path's extension: for people
 * to look at (loaderctl pipeline --grid), not for datasets.
 */
#ifndef LD_IMGWRITE_H
#define LD_IMGWRITE_H

#include <stdint.h>

#include "diag.h"

/*
 * Write w x h RGB pixels (rows of w * 3 bytes, back to back) to path:
 * ".png" as PNG, ".jpg" or ".jpeg" as JPEG (any case). Returns 0, or
 * LOADER_EUSAGE for another extension, or a negative code with d naming
 * the file.
 */
int imgwrite_rgb(const char *path, const uint8_t *rgb, uint32_t w, uint32_t h,
		 struct diag *d);

#endif /* LD_IMGWRITE_H */
