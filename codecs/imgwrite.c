/*
 * imgwrite.c - RGB images as PNG or JPEG bytes (imgwrite.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <png.h>
#include <turbojpeg.h>

#include "imgwrite.h"
#include "loader_error.h"

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n > k && !strcasecmp(s + n - k, suffix);
}

static bool is_png(const char *name)
{
	return ends_with(name, ".png");
}

bool imgwrite_named(const char *name)
{
	return is_png(name) || ends_with(name, ".jpg") ||
	       ends_with(name, ".jpeg");
}

static int encode_png(const char *name, const uint8_t *rgb, uint32_t w,
		      uint32_t h, void **out, size_t *len, struct diag *d)
{
	png_image im;
	png_alloc_size_t n = 0;

	memset(&im, 0, sizeof(im));
	im.version = PNG_IMAGE_VERSION;
	im.width = w;
	im.height = h;
	im.format = PNG_FORMAT_RGB;
	/* Once for the size, once for the bytes. */
	if (!png_image_write_to_memory(&im, NULL, &n, 0, rgb, (png_int_32)w * 3,
				       NULL))
		return diag_set(d, LOADER_EDECODE, "%s: %s", name, im.message);
	*out = malloc(n);
	if (!*out)
		return diag_set(d, -ENOMEM, "%s: out of memory", name);
	if (!png_image_write_to_memory(&im, *out, &n, 0, rgb, (png_int_32)w * 3,
				       NULL)) {
		free(*out);
		*out = NULL;
		return diag_set(d, LOADER_EDECODE, "%s: %s", name, im.message);
	}
	*len = n;
	return 0;
}

static int encode_jpeg(const char *name, const uint8_t *rgb, uint32_t w,
		       uint32_t h, void **out, size_t *len, struct diag *d)
{
	tjhandle tj = tjInitCompress();
	unsigned char *buf = NULL;
	unsigned long n = 0;
	int err = 0;

	if (!tj)
		return diag_set(d, -ENOMEM, "%s: no JPEG compressor", name);
	if (tjCompress2(tj, rgb, (int)w, 0, (int)h, TJPF_RGB, &buf, &n,
			TJSAMP_444, 95, TJFLAG_ACCURATEDCT)) {
		err = diag_set(d, LOADER_EDECODE, "%s: %s", name,
			       tjGetErrorStr2(tj));
		goto out;
	}
	*out = malloc(n);
	if (!*out) {
		err = diag_set(d, -ENOMEM, "%s: out of memory", name);
		goto out;
	}
	memcpy(*out, buf, n);
	*len = n;
out:
	tjFree(buf);
	tjDestroy(tj);
	return err;
}

int imgwrite_encode(const char *name, const uint8_t *rgb, uint32_t w,
		    uint32_t h, void **out, size_t *len, struct diag *d)
{
	*out = NULL;
	*len = 0;
	if (!imgwrite_named(name))
		return diag_set(d, LOADER_EUSAGE,
				"%s: not a .png, .jpg or .jpeg name", name);
	if (is_png(name))
		return encode_png(name, rgb, w, h, out, len, d);
	return encode_jpeg(name, rgb, w, h, out, len, d);
}
