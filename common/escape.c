/*
 * escape.c - client text made safe to print (see escape.h).
 */
#include <string.h>

#include "escape.h"

size_t esc_text(char *dst, size_t cap, const char *src, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)src[i];
		char e[4];
		size_t k = 0;

		if (c < 0x20 || c == 0x7f) {
			e[k++] = '\\';
			e[k++] = 'x';
			e[k++] = hex[c >> 4];
			e[k++] = hex[c & 15];
		} else if (c == '\\') {
			e[k++] = '\\';
			e[k++] = '\\';
		} else {
			e[k++] = (char)c;
		}
		if (n + k >= cap)
			break;
		memcpy(dst + n, e, k);
		n += k;
	}
	dst[n] = '\0';
	return n;
}

const char *esc_str(char *dst, size_t cap, const char *src)
{
	esc_text(dst, cap, src, strlen(src));
	return dst;
}
