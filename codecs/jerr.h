/*
 * jerr.h - libjpeg's error handling as every decoder in this folder
 * wants it: a fatal error longjmps back to the module's entry point,
 * warnings (damaged data) count as errors, and nothing is printed.
 *
 * Include it after stdio.h and jpeglib.h.
 */
#ifndef LD_JERR_H
#define LD_JERR_H

#include <setjmp.h>

#include "diag.h"

struct jerr {
	struct jpeg_error_mgr pub;
	jmp_buf jb; /* set by the entry point about to call libjpeg */
};

/* Point a libjpeg object's error manager at e; returns &e->pub. */
struct jpeg_error_mgr *jerr_init(struct jerr *e);

/*
 * After a longjmp: the message libjpeg left, as a diag ("jpeg WHAT:
 * MESSAGE"). Returns -ENOMEM when libjpeg ran out of memory, otherwise
 * LOADER_EDECODE. The caller then aborts or destroys the object.
 */
int jerr_diag(j_common_ptr cinfo, const char *what, struct diag *d);

#endif /* LD_JERR_H */
