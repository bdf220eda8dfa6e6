/*
 * imgwrite.c - RGB images to PNG or JPEG files (imgwrite.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
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

static int write_png(const char *path, const uint8_t *rgb, uint32_t w,
		     uint32_t h, struct diag *d)
{
	png_image im;

	memset(&im, 0, sizeof(im));
	im.version = PNG_IMAGE_VERSION;
	im.width = w;
	im.height = h;
	im.format = PNG_FORMAT_RGB;
	if (!png_image_write_to_file(&im, path, 0, rgb, (png_int_32)w * 3,
				     NULL))
		return diag_set(d, -EIO, "%s: %s", path, im.message);
	return 0;
}

static int write_jpeg(const char *path, const uint8_t *rgb, uint32_t w,
		      uint32_t h, struct diag *d)
{
	tjhandle tj = tjInitCompress();
	unsigned char *out = NULL;
	unsigned long len = 0;
	FILE *f;
	int err = 0;

	if (!tj)
		return diag_set(d, -ENOMEM, "%s: no JPEG compressor", path);
	if (tjCompress2(tj, rgb, (int)w, 0, (int)h, TJPF_RGB, &out, &len,
			TJSAMP_444, 95, TJFLAG_ACCURATEDCT)) {
		err = diag_set(d, LOADER_EDECODE, "%s: %s", path,
			       tjGetErrorStr2(tj));
		goto out;
	}
	f = fopen(path, "wb");
	if (!f || fwrite(out, 1, len, f) != len) {
		err = diag_set(d, -errno ? -errno : -EIO, "%s: %s", path,
			       strerror(errno ? errno : EIO));
		if (f)
			fclose(f);
		goto out;
	}
	if (fclose(f))
		err = diag_set(d, -errno, "%s: %s", path, strerror(errno));
out:
	tjFree(out);
	tjDestroy(tj);
	return err;
}

int imgwrite_rgb(const char *path, const uint8_t *rgb, uint32_t w, uint32_t h,
		 struct diag *d)
{
	if (ends_with(path, ".png"))
		return write_png(path, rgb, w, h, d);
	if (ends_with(path, ".jpg") || ends_with(path, ".jpeg"))
		return write_jpeg(path, rgb, w, h, d);
	return diag_set(d, LOADER_EUSAGE,
			"%s: write a .png or a .jpg (the extension says which)",
			path);
}
