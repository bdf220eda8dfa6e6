/*
 * fuzz_ispec.c - the image pipeline spec ("decode | rrc 224 | ..."):
 * parsed, and what parses formatted and parsed again to the same text.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "ispec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), a[ISPEC_TEXT_MAX], b[ISPEC_TEXT_MAX];
	struct ispec sp, again;
	struct diag d;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (!ispec_parse(&sp, text, &d) &&
	    ispec_format(&sp, a, sizeof(a)) >= 0) {
		if (ispec_parse(&again, a, &d) ||
		    ispec_format(&again, b, sizeof(b)) < 0 || strcmp(a, b))
			abort(); /* a spec's text must read back as itself */
	}
	free(text);
	return 0;
}
