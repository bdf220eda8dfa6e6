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
#include <stdbool.h>

#include "diag.h"

/*
 * Scans a JPEG may have (a progressive one; baseline has one a
 * component, at most 4). Each scan of a progressive JPEG makes the
 * decoder pass over the whole image's coefficients, whatever region is
 * asked for: a few hundred tiny scans ("scan bomb") cost seconds of a
 * shared decode thread. Encoders write 10 or so; past this limit the
 * file is damaged data.
 */
#define JERR_MAX_SCANS 64

struct jerr {
	struct jpeg_error_mgr pub;
	jmp_buf jb; /* set by the entry point about to call libjpeg */
	struct jpeg_progress_mgr progress;
	bool too_many_scans; /* why the last longjmp came */
};

/* Point a libjpeg object's error manager at e; returns &e->pub. */
struct jpeg_error_mgr *jerr_init(struct jerr *e);

/*
 * Make decompressor ci (whose error manager is e's) fail, as damaged
 * data, at its JERR_MAX_SCANS + 1st scan.
 */
void jerr_limit_scans(j_decompress_ptr ci, struct jerr *e);

/*
 * A decompressor keeps the quantization and Huffman tables of the files
 * it read before, and uses them for a file that defines none of its own
 * (an "abbreviated" JPEG): the pixels would depend on which file the
 * decoder read last, which depends on threads and timing. Call
 * jerr_forget_tables() before each jpeg_read_header() (under setjmp: the
 * first call allocates) to put tables no file can use in every slot: a
 * scan whose Huffman table the file does not define then fails as
 * damaged data, even on a fresh decoder (libjpeg's stand-in tables
 * would differ from a used one). After jpeg_start_decompress() or
 * jpeg_read_coefficients(), jerr_check_tables() says whether every
 * component has a quantization table of this file: 0, or LOADER_EDECODE
 * naming the component in d.
 */
void jerr_forget_tables(j_decompress_ptr ci);
int jerr_check_tables(j_decompress_ptr ci, struct diag *d);

/*
 * After a longjmp: the message libjpeg left, as a diag ("jpeg WHAT:
 * MESSAGE"). Returns -ENOMEM when libjpeg ran out of memory, otherwise
 * LOADER_EDECODE. The caller then aborts or destroys the object.
 */
int jerr_diag(j_common_ptr cinfo, const char *what, struct diag *d);

#endif /* LD_JERR_H */
