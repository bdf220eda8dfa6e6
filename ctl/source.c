/*
 * source.c - helpers shared by the pack sources.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "source.h"

void source_free_classes(char **classes, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		free(classes[i]);
	free(classes);
}

int source_parse_classes(const char *list, char ***out, uint32_t *n)
{
	uint32_t cap = 1, k = 0;
	const char *p = list;
	char **v;

	for (const char *c = list; *c; c++)
		cap += *c == ',';
	v = calloc(cap, sizeof(char *));
	if (!v)
		return -ENOMEM;
	for (;;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);

		v[k] = strndup(p, len);
		if (!v[k]) {
			source_free_classes(v, k);
			return -ENOMEM;
		}
		k++;
		if (!e)
			break;
		p = e + 1;
	}
	*out = v;
	*n = k;
	return 0;
}
