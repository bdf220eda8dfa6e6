/*
 * fuzz_escape.c - the formatter of client text in log lines and
 * loaderctl's tables (common/escape.c). The first input byte picks the
 * output's size, the rest is the text. Whatever it is: the output holds
 * no control byte, fits its buffer, and reads back (\\ and \xNN undone)
 * to a prefix of the text, the whole text when the buffer has room for
 * every byte escaped.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "fuzz.h"

static int unhex(char c)
{
	return c >= '0' && c <= '9' ? c - '0' :
	       c >= 'a' && c <= 'f' ? c - 'a' + 10 :
				      -1;
}

/* Undo the escapes of out (n bytes) into back; its length, or -1. */
static long read_back(const char *out, size_t n, char *back)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (out[i] != '\\') {
			back[k++] = out[i];
		} else if (i + 1 < n && out[i + 1] == '\\') {
			back[k++] = '\\';
			i++;
		} else if (i + 3 < n && out[i + 1] == 'x' &&
			   unhex(out[i + 2]) >= 0 && unhex(out[i + 3]) >= 0) {
			back[k++] = (char)(unhex(out[i + 2]) << 4 |
					   unhex(out[i + 3]));
			i += 3;
		} else {
			return -1;
		}
	}
	return (long)k;
}

static void check(const char *text, size_t len, size_t cap, bool whole)
{
	char *out = malloc(cap), *back = malloc(cap);
	size_t n;
	long k;

	if (!out || !back)
		abort();
	n = esc_text(out, cap, text, len);
	if (n >= cap || out[n] != '\0')
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
			abort();
	k = read_back(out, n, back);
	if (k < 0 || (size_t)k > len || memcmp(back, text, (size_t)k) ||
	    (whole && (size_t)k != len))
		abort();
	free(out);
	free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	check((const char *)data + 1, size - 1, (size_t)data[0] + 1, false);
	check((const char *)data + 1, size - 1, 4 * (size - 1) + 1, true);
	return 0;
}
