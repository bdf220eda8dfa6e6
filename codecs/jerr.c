/*
 * jerr.c - libjpeg's error handling for this folder (see jerr.h).
 */
#include <errno.h>
#include <stdio.h> /* jpeglib.h needs FILE and size_t first */
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#include "jerr.h"
#include "loader_error.h"

/*
 * libjpeg calls this for a fatal error. Jump back to the entry point
 * that started the libjpeg call; the message is formatted there, from
 * the error manager's state.
 */
static void jerr_exit(j_common_ptr cinfo)
{
	struct jerr *e = (struct jerr *)cinfo->err;

	longjmp(e->jb, 1);
}

/*
 * Warnings (level -1) mean damaged data, e.g. a truncated image padded
 * with a fake end marker: treat them as errors. Trace messages (level
 * >= 0) are ignored, as libjpeg's default does unless asked to print.
 */
static void jerr_emit(j_common_ptr cinfo, int msg_level)
{
	if (msg_level < 0)
		jerr_exit(cinfo);
}

/* Nothing is printed: messages reach the caller through its diag. */
static void jerr_output(j_common_ptr cinfo)
{
}

struct jpeg_error_mgr *jerr_init(struct jerr *e)
{
	jpeg_std_error(&e->pub);
	e->too_many_scans = false;
	e->pub.error_exit = jerr_exit;
	e->pub.emit_message = jerr_emit;
	e->pub.output_message = jerr_output;
	return &e->pub;
}

/*
 * libjpeg reports progress as it reads (every row of MCUs): the scan it
 * is in is counted there, so a file with too many scans stops before it
 * has cost much.
 */
static void jerr_progress(j_common_ptr cinfo)
{
	struct jerr *e = (struct jerr *)cinfo->err;

	if (cinfo->is_decompressor &&
	    ((j_decompress_ptr)cinfo)->input_scan_number > JERR_MAX_SCANS) {
		e->too_many_scans = true;
		longjmp(e->jb, 1);
	}
}

void jerr_limit_scans(j_decompress_ptr ci, struct jerr *e)
{
	e->progress.progress_monitor = jerr_progress;
	e->too_many_scans = false;
	ci->progress = &e->progress;
}

int jerr_diag(j_common_ptr cinfo, const char *what, struct diag *d)
{
	char msg[JMSG_LENGTH_MAX];
	int code = cinfo->err->msg_code;
	struct jerr *e = (struct jerr *)cinfo->err;

	if (e->too_many_scans) {
		e->too_many_scans = false;
		return diag_set(
			d, LOADER_EDECODE,
			"jpeg %s: more than %d scans (a progressive JPEG that costly is refused)",
			what, JERR_MAX_SCANS);
	}

	cinfo->err->format_message(cinfo, msg);
	if (code == JERR_OUT_OF_MEMORY)
		return diag_set(d, -ENOMEM, "jpeg %s: %s", what, msg);
	return diag_set(d, LOADER_EDECODE, "jpeg %s: %s", what, msg);
}

/*
 * A Huffman table that libjpeg refuses to use: more codes than there
 * are symbols (jpeg_make_d_derived_tbl() fails on it). A DHT marker
 * overwrites it, bits[0] included.
 */
static void forget_huff(j_decompress_ptr ci, JHUFF_TBL **t)
{
	if (!*t)
		*t = jpeg_alloc_huff_table((j_common_ptr)ci);
	memset((*t)->bits, 0, sizeof((*t)->bits));
	(*t)->bits[16] = 255;
	(*t)->bits[15] = 255;
}

void jerr_forget_tables(j_decompress_ptr ci)
{
	for (int i = 0; i < NUM_QUANT_TBLS; i++) {
		if (!ci->quant_tbl_ptrs[i])
			ci->quant_tbl_ptrs[i] =
				jpeg_alloc_quant_table((j_common_ptr)ci);
		/* 0 is no quantizer's value: a DQT marker overwrites it. */
		memset(ci->quant_tbl_ptrs[i]->quantval, 0,
		       sizeof(ci->quant_tbl_ptrs[i]->quantval));
	}
	for (int i = 0; i < NUM_HUFF_TBLS; i++) {
		forget_huff(ci, &ci->dc_huff_tbl_ptrs[i]);
		forget_huff(ci, &ci->ac_huff_tbl_ptrs[i]);
	}
}

int jerr_check_tables(j_decompress_ptr ci, struct diag *d)
{
	for (int i = 0; i < ci->num_components; i++) {
		const JQUANT_TBL *q = ci->comp_info[i].quant_table;

		if (!q || q->quantval[0] == 0)
			return diag_set(
				d, LOADER_EDECODE,
				"jpeg: component %d has no quantization table of its own",
				i);
	}
	return 0;
}
