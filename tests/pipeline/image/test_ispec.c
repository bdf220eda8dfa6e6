/*
 * test_ispec.c - the image pipeline spec (parse, canonical format, bad
 * specs with their columns).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "loader_error.h"
#include "ispec.h"
#include "schema.h"
#include "../../unit_util.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

#define IMNET_M                                                                \
	{                                                                      \
		0.485, 0.456, 0.406                                            \
	}
#define IMNET_S                                                                \
	{                                                                      \
		0.229, 0.224, 0.225                                            \
	}
#define RRC_DEF .scale = { 0.08, 1.0 }, .ratio = { 3.0 / 4, 4.0 / 3 }

/* A good spec, its canonical text (NULL: the same) and what it holds. */
struct good {
	const char *text, *canon;
	struct ispec want;
};

static const struct good good[] = {
	{ "decode | rrc 224 | flip 0.5 | normalize imagenet | f16 | nchw",
	  NULL,
	  { .geom = ISPEC_RRC,
	    .dtype = DT_F16,
	    .layout = ISPEC_NCHW,
	    .has_flip = true,
	    .has_normalize = true,
	    .size = 224,
	    RRC_DEF,
	    .flip = 0.5,
	    .mean = IMNET_M,
	    .std = IMNET_S } },
	{ "decode | resize 256 | center 224 | normalize imagenet | f32 | nchw",
	  NULL,
	  { .geom = ISPEC_CENTER,
	    .dtype = DT_F32,
	    .has_normalize = true,
	    .size = 224,
	    .resize = 256,
	    .mean = IMNET_M,
	    .std = IMNET_S } },
	{ "decode | center 224 | u8 | nhwc",
	  NULL,
	  { .geom = ISPEC_CENTER,
	    .dtype = DT_U8,
	    .layout = ISPEC_NHWC,
	    .size = 224 } },
	{ "decode|rrc 224",
	  "decode | rrc 224 | f32 | nchw",
	  { .geom = ISPEC_RRC, .dtype = DT_F32, .size = 224, RRC_DEF } },
	{ "  decode |  rrc   224 scale 0.25 1 ratio 0.75 1.5 |flip 0|f16\n",
	  "decode | rrc 224 scale 0.25 1 ratio 3/4 3/2 | flip 0 | f16 | nchw",
	  { .geom = ISPEC_RRC,
	    .dtype = DT_F16,
	    .has_flip = true,
	    .size = 224,
	    .scale = { 0.25, 1 },
	    .ratio = { 0.75, 1.5 } } },
	{ "decode | rrc 224 ratio 3/4 4/3 scale 0.08 1.0",
	  "decode | rrc 224 | f32 | nchw",
	  { .geom = ISPEC_RRC, .dtype = DT_F32, .size = 224, RRC_DEF } },
	{ "decode | rrc 8192 ratio 1 1 | f32 | nchw",
	  NULL,
	  { .geom = ISPEC_RRC,
	    .dtype = DT_F32,
	    .size = 8192,
	    .scale = { 0.08, 1 },
	    .ratio = { 1, 1 } } },
	{ "decode | rrc 1 ratio 1/3 2 | u8 | nchw",
	  NULL,
	  { .geom = ISPEC_RRC,
	    .dtype = DT_U8,
	    .size = 1,
	    .scale = { 0.08, 1 },
	    .ratio = { 1.0 / 3, 2 } } },
	{ "decode | center 32 | normalize 0.5,0.25,0.125 0.5,0.5,2 | f32 | nhwc",
	  NULL,
	  { .geom = ISPEC_CENTER,
	    .dtype = DT_F32,
	    .layout = ISPEC_NHWC,
	    .has_normalize = true,
	    .size = 32,
	    .mean = { 0.5, 0.25, 0.125 },
	    .std = { 0.5, 0.5, 2 } } },
	{ "decode | resize 1 | center 1 | flip 1 | normalize 0,0,1 1e-3,1,1 | f16 | nhwc",
	  "decode | resize 1 | center 1 | flip 1 | normalize 0,0,1 0.001,1,1 | f16 | nhwc",
	  { .geom = ISPEC_CENTER,
	    .dtype = DT_F16,
	    .layout = ISPEC_NHWC,
	    .has_flip = true,
	    .has_normalize = true,
	    .size = 1,
	    .resize = 1,
	    .flip = 1,
	    .mean = { 0, 0, 1 },
	    .std = { 0.001, 1, 1 } } },
	{ "decode | rrc 224 | normalize 0.485,0.456,0.406 0.229,0.224,0.225",
	  "decode | rrc 224 | normalize imagenet | f32 | nchw",
	  { .geom = ISPEC_RRC,
	    .dtype = DT_F32,
	    .has_normalize = true,
	    .size = 224,
	    RRC_DEF,
	    .mean = IMNET_M,
	    .std = IMNET_S } },
	{ "decode | rrc 224 scale 0.3 0.3 | flip 0.125 | f16 | nhwc",
	  NULL,
	  { .geom = ISPEC_RRC,
	    .dtype = DT_F16,
	    .layout = ISPEC_NHWC,
	    .has_flip = true,
	    .size = 224,
	    .scale = { 0.3, 0.3 },
	    .ratio = { 3.0 / 4, 4.0 / 3 },
	    .flip = 0.125 } },
};

static void expect_same(const struct ispec *a, const struct ispec *b,
			const char *text)
{
	cr_expect_eq(a->geom, b->geom, "%s: geom", text);
	cr_expect_eq(a->dtype, b->dtype, "%s: dtype", text);
	cr_expect_eq(a->layout, b->layout, "%s: layout", text);
	cr_expect_eq(a->has_flip, b->has_flip, "%s: has_flip", text);
	cr_expect_eq(a->has_normalize, b->has_normalize, "%s: norm", text);
	cr_expect_eq(a->size, b->size, "%s: size", text);
	cr_expect_eq(a->resize, b->resize, "%s: resize", text);
	cr_expect_eq(a->flip, b->flip, "%s: flip", text);
	for (unsigned i = 0; i < 2; i++) {
		cr_expect_eq(a->scale[i], b->scale[i], "%s: scale", text);
		cr_expect_eq(a->ratio[i], b->ratio[i], "%s: ratio", text);
	}
	for (unsigned c = 0; c < 3; c++) {
		cr_expect_eq(a->mean[c], b->mean[c], "%s: mean", text);
		cr_expect_eq(a->std[c], b->std[c], "%s: std", text);
	}
}

/* Colour stages: any number, in any order, each with its arguments and
 * its probability (torchvision's default when not given). */
Test(ispec, colour_stages)
{
	static const char *text =
		"decode | rrc 224 | flip 0.5 | jitter 0.4 0.4 0.4 0.1 | "
		"grayscale | hue 0.5 p 0.25 | invert | posterize 4 p 1 | "
		"solarize 128 | brightness 0 | contrast 1000 | normalize "
		"imagenet | f16 | nchw";
	static const struct ispec_op want[] = {
		{ .kind = ISPEC_OP_JITTER, .p = 1, .a = { 0.4, 0.4, 0.4, 0.1 } },
		{ .kind = ISPEC_OP_GRAYSCALE, .p = 0.1, .a = { 0 } },
		{ .kind = ISPEC_OP_HUE, .p = 0.25, .a = { 0.5 } },
		{ .kind = ISPEC_OP_INVERT, .p = 0.5, .a = { 0 } },
		{ .kind = ISPEC_OP_POSTERIZE, .p = 1, .a = { 4 } },
		{ .kind = ISPEC_OP_SOLARIZE, .p = 0.5, .a = { 128 } },
		{ .kind = ISPEC_OP_BRIGHTNESS, .p = 1, .a = { 0 } },
		{ .kind = ISPEC_OP_CONTRAST, .p = 1, .a = { 1000 } },
	};
	struct ispec sp, again;
	char buf[ISPEC_TEXT_MAX];
	struct diag d;

	cr_assert_eq(ispec_parse(&sp, text, &d), 0, "%s", d.msg);
	cr_assert_eq(sp.nops, NELEM(want));
	for (size_t i = 0; i < NELEM(want); i++) {
		cr_expect_eq(sp.ops[i].kind, want[i].kind, "op %zu", i);
		cr_expect_eq(sp.ops[i].p, want[i].p, "op %zu: p", i);
		for (unsigned k = 0; k < 4; k++)
			cr_expect_eq(sp.ops[i].a[k], want[i].a[k], "op %zu", i);
	}
	cr_expect(sp.has_flip && sp.has_normalize && sp.dtype == DT_F16);
	ispec_format(&sp, buf, sizeof(buf));
	cr_expect_str_eq(buf, text, "the canonical text is the spec's");
	cr_assert_eq(ispec_parse(&again, buf, &d), 0, "%s", d.msg);
	cr_expect_eq(memcmp(&sp, &again, sizeof(sp)), 0);
	cr_expect_eq(
		ispec_parse(&sp, "decode | center 8 | grayscale p 0.1", NULL),
		0);
	ispec_format(&sp, buf, sizeof(buf));
	cr_expect_str_eq(buf, "decode | center 8 | grayscale | f32 | nchw",
			 "a default probability is left out");
	cr_assert_eq(
		ispec_parse(&sp,
			    "decode | center 8 | autocontrast | equalize p "
			    "1 | sharpness 2 | gaussian_blur 5 0.1 2 p 0.5 | "
			    "channel_shift 20",
			    &d),
		0, "%s", d.msg);
	cr_expect_eq(sp.nops, 5);
	cr_expect(sp.ops[3].kind == ISPEC_OP_BLUR && sp.ops[3].a[0] == 5 &&
		  sp.ops[3].a[1] == 0.1 && sp.ops[3].a[2] == 2 &&
		  sp.ops[3].p == 0.5);
	ispec_format(&sp, buf, sizeof(buf));
	cr_expect_str_eq(buf,
			 "decode | center 8 | autocontrast | equalize p 1 | "
			 "sharpness 2 | gaussian_blur 5 0.1 2 p 0.5 | "
			 "channel_shift 20 | f32 | nchw");
}

/* vflip, erase and cutout: their words, defaults and canonical text. */
Test(ispec, vflip_erase_cutout)
{
	struct ispec sp, again;
	char buf[ISPEC_TEXT_MAX];
	struct diag d;

	cr_assert_eq(ispec_parse(&sp,
				 "decode | rrc 64 | vflip 0.25 | normalize "
				 "imagenet | erase value random ratio 1 2 | "
				 "cutout 16 p 0.5",
				 &d),
		     0, "%s", d.msg);
	cr_expect(sp.has_vflip && sp.vflip == 0.25);
	cr_expect(sp.has_erase && sp.erase.p == 0.5 &&
		  sp.erase.scale[0] == 0.02 && sp.erase.scale[1] == 0.33 &&
		  sp.erase.ratio[0] == 1 && sp.erase.ratio[1] == 2 &&
		  sp.erase.value == ISPEC_ERASE_RANDOM);
	cr_expect(sp.has_cutout && sp.cutout.size == 16 && sp.cutout.p == 0.5);
	ispec_format(&sp, buf, sizeof(buf));
	cr_expect_str_eq(buf,
			 "decode | rrc 64 | vflip 0.25 | normalize imagenet | "
			 "erase ratio 1 2 value random | cutout 16 p 0.5 | "
			 "f32 | nchw");
	cr_assert_eq(ispec_parse(&again, buf, &d), 0, "%s", d.msg);
	cr_expect_eq(memcmp(&sp, &again, sizeof(sp)), 0);
	cr_assert_eq(ispec_parse(&sp,
				 "decode | center 8 | erase p 1 scale 0.1 0.5 "
				 "ratio 0.5 2 value 0.5,0,-1",
				 &d),
		     0, "%s", d.msg);
	cr_expect(sp.erase.value == ISPEC_ERASE_RGB && sp.erase.rgb[2] == -1);
	cr_expect_eq(ispec_parse(&sp, "decode | center 8 | erase value x", &d),
		     LOADER_EUSAGE);
	cr_expect(strstr(d.msg, "is not 0, three values"), "%s", d.msg);
	cr_expect_eq(ispec_parse(&sp, "decode | center 8 | erase p 1 p 1", &d),
		     LOADER_EUSAGE);
	cr_expect(strstr(d.msg, "is given twice"), "%s", d.msg);
	cr_expect_eq(
		ispec_parse(&sp, "decode | center 8 | cutout 4 | erase", &d),
		LOADER_EUSAGE, "erase comes before cutout");
}

/* The geometric stages and policies: their ranges, fill and interp. */
Test(ispec, geometric_stages)
{
	struct ispec sp, again;
	struct diag d;
	char buf[ISPEC_TEXT_MAX];
	const struct ispec_affine *af;

	cr_assert_eq(ispec_parse(&sp,
				 "decode | rrc 64 | rotate 30 | affine rotate "
				 "-10 20 translate 0.1 0.2 scale 0.8 1.2 zoom "
				 "0.9 1.1 shear 5 interp bilinear fill 1,2,3 p "
				 "0.5 | trivialaugment | randaugment 2 9 | "
				 "autoaugment imagenet fill 1,2,3",
				 &d),
		     0, "%s", d.msg);
	cr_assert_eq(sp.nops, 5);
	cr_expect(sp.ops[0].kind == ISPEC_OP_ROTATE && sp.ops[0].a[0] == -30 &&
		  sp.ops[0].a[1] == 30 && sp.ops[0].p == 1);
	af = &sp.ops[1].af;
	cr_expect(sp.ops[1].kind == ISPEC_OP_AFFINE && sp.ops[1].p == 0.5);
	cr_expect(af->deg[0] == -10 && af->deg[1] == 20 &&
		  af->translate[0] == 0.1 && af->translate[1] == 0.2 &&
		  af->scale[0] == 0.8 && af->scale[1] == 1.2 &&
		  af->zoom[0] == 0.9 && af->zoom[1] == 1.1 &&
		  af->shear[0] == -5 && af->shear[1] == 5 &&
		  af->shear[2] == 0 && af->shear[3] == 0);
	cr_expect(sp.ops[3].kind == ISPEC_OP_RANDAUG && sp.ops[3].a[0] == 2 &&
		  sp.ops[3].a[1] == 9);
	cr_expect(sp.ops[4].kind == ISPEC_OP_AUTOAUG);
	cr_expect(sp.interp == ISPEC_INTERP_BILINEAR &&
		  sp.fill == ISPEC_FILL_CONSTANT && sp.fill_rgb[0] == 1 &&
		  sp.fill_rgb[1] == 2 && sp.fill_rgb[2] == 3);
	cr_expect(ispec_has_warp(&sp));
	ispec_format(&sp, buf, sizeof(buf));
	cr_expect_str_eq(buf,
			 "decode | rrc 64 | rotate 30 interp bilinear fill "
			 "1,2,3 | affine rotate -10 20 translate 0.1 0.2 "
			 "scale 0.8 1.2 zoom 0.9 1.1 shear 5 p 0.5 | "
			 "trivialaugment | randaugment 2 9 | autoaugment "
			 "imagenet | f32 | nchw");
	cr_assert_eq(ispec_parse(&again, buf, &d), 0, "%s", d.msg);
	cr_expect_eq(memcmp(&sp, &again, sizeof(sp)), 0);

	cr_assert_eq(ispec_parse(&sp,
				 "decode | center 8 | affine shear -1 2 -3 4 "
				 "fill context",
				 &d),
		     0, "%s", d.msg);
	cr_expect(sp.fill == ISPEC_FILL_CONTEXT &&
		  sp.ops[0].af.shear[2] == -3 && sp.ops[0].af.shear[3] == 4);
	ispec_format(&sp, buf, sizeof(buf));
	cr_expect_str_eq(buf, "decode | center 8 | affine shear -1 2 -3 4 "
			      "fill context | f32 | nchw");
	for (unsigned k = 0; k < 3; k++) {
		static const char *const mode[] = { "nearest", "reflect",
						    "wrap" };
		char text[96];

		snprintf(text, sizeof(text),
			 "decode | center 8 | rotate 5 fill %s", mode[k]);
		cr_assert_eq(ispec_parse(&sp, text, &d), 0, "%s", d.msg);
		cr_expect_eq(sp.fill, ISPEC_FILL_NEAREST + k);
	}
	cr_assert_eq(ispec_parse(&sp, "decode | center 8 | brightness 0.1", &d),
		     0, "%s", d.msg);
	cr_expect(!ispec_has_warp(&sp));
	cr_expect_eq(
		ispec_parse(&sp, "decode | center 8 | affine shear 90", &d),
		LOADER_EUSAGE);
	cr_expect(strstr(d.msg, "is not an angle in -89..89"), "%s", d.msg);
}

/* A misspelt stage is named with the one it is closest to. */
Test(ispec, suggests_a_stage)
{
	struct diag d;

	cr_expect_eq(ispec_parse(&(struct ispec){ 0 },
				 "decode | center 8 | brightnes 0.2", &d),
		     LOADER_EUSAGE);
	cr_expect(strstr(d.msg, "did you mean \"brightness\"?"), "%s", d.msg);
	cr_expect_eq(ispec_parse(&(struct ispec){ 0 },
				 "decode | center 8 | hu 0.2", &d),
		     LOADER_EUSAGE);
	cr_expect(strstr(d.msg, "did you mean \"hue\"?"), "%s", d.msg);
	cr_expect_eq(ispec_parse(&(struct ispec){ 0 },
				 "decode | center 8 | xyzzy", &d),
		     LOADER_EUSAGE);
	cr_expect(!strstr(d.msg, "did you mean") &&
			  strstr(d.msg, "(stages: decode, rrc"),
		  "%s", d.msg);
}

Test(ispec, good_specs_parse_and_round_trip)
{
	for (size_t i = 0; i < NELEM(good); i++) {
		const struct good *g = &good[i];
		const char *canon = g->canon ? g->canon : g->text;
		struct ispec sp, again;
		struct diag d;
		char buf[ISPEC_TEXT_MAX];
		int rc = ispec_parse(&sp, g->text, &d);

		cr_assert_eq(rc, 0, "\"%s\": %d %s", g->text, rc, d.msg);
		expect_same(&sp, &g->want, g->text);
		rc = ispec_format(&sp, buf, sizeof(buf));
		cr_expect_eq(rc, (int)strlen(canon), "\"%s\"", g->text);
		cr_expect_str_eq(buf, canon, "\"%s\"", g->text);
		cr_assert_eq(ispec_parse(&again, buf, &d), 0, "%s", d.msg);
		cr_expect_eq(memcmp(&sp, &again, sizeof(sp)), 0, "\"%s\"", buf);
	}
}

/* The batch stages: their values, defaults and canonical text. */
Test(ispec, batch_stages)
{
	static const struct {
		const char *text, *canon;
		struct ispec_batch want;
	} t[] = {
		{ "decode | center 8 | mixup 0.2",
		  "decode | center 8 | f32 | nchw | mixup 0.2",
		  { .on = true, .mixup = 0.2, .cut_p = 0.5 } },
		{ "decode | center 8 | f32 | nchw | cutmix 1.0",
		  "decode | center 8 | f32 | nchw | cutmix 1",
		  { .on = true, .cutmix = 1, .cut_p = 0.5 } },
		{ "decode | rrc 8 | mixup 0.2 | cutmix 1.0 | label_smoothing 0.1",
		  "decode | rrc 8 | f32 | nchw | mixup 0.2 | cutmix 1 | "
		  "label_smoothing 0.1",
		  { .on = true,
		    .has_smoothing = true,
		    .mixup = 0.2,
		    .cutmix = 1,
		    .cut_p = 0.5,
		    .smoothing = 0.1 } },
		{ "decode | center 8 | u8 | mixup 0.8 | cutmix 1 | switch 0.5 | "
		  "pair flip",
		  "decode | center 8 | u8 | nchw | mixup 0.8 | cutmix 1",
		  { .on = true, .mixup = 0.8, .cutmix = 1, .cut_p = 0.5 } },
		{ "decode | center 8 | mixup 0.01 | cutmix 1000 | switch 0.25 "
		  "| pair roll | label_smoothing 0 | classes 1000000",
		  "decode | center 8 | f32 | nchw | mixup 0.01 | cutmix 1000 | "
		  "switch 0.25 | pair roll | label_smoothing 0 | "
		  "classes 1000000",
		  { .on = true,
		    .has_smoothing = true,
		    .pair = ISPEC_PAIR_ROLL,
		    .mixup = 0.01,
		    .cutmix = 1000,
		    .cut_p = 0.25,
		    .classes = 1000000 } },
		{ "decode | center 8 | label_smoothing 0.1 | classes 10",
		  "decode | center 8 | f32 | nchw | label_smoothing 0.1 | "
		  "classes 10",
		  { .on = true,
		    .has_smoothing = true,
		    .smoothing = 0.1,
		    .classes = 10 } },
		{ "decode | center 8", "decode | center 8 | f32 | nchw", { 0 } },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		const char *canon = t[i].canon ? t[i].canon : t[i].text;
		const struct ispec_batch *w = &t[i].want;
		struct ispec sp, again;
		struct diag d;
		char buf[ISPEC_TEXT_MAX];

		cr_assert_eq(ispec_parse(&sp, t[i].text, &d), 0, "\"%s\": %s",
			     t[i].text, d.msg);
		cr_expect_eq(sp.batch.on, w->on, "%s", t[i].text);
		cr_expect_eq(sp.batch.has_smoothing, w->has_smoothing, "%s",
			     t[i].text);
		cr_expect_eq(sp.batch.pair, w->pair, "%s", t[i].text);
		cr_expect_eq(sp.batch.mixup, w->mixup, "%s", t[i].text);
		cr_expect_eq(sp.batch.cutmix, w->cutmix, "%s", t[i].text);
		cr_expect_eq(sp.batch.cut_p, w->cut_p, "%s", t[i].text);
		cr_expect_eq(sp.batch.smoothing, w->smoothing, "%s", t[i].text);
		cr_expect_eq(sp.batch.classes, w->classes, "%s", t[i].text);
		ispec_format(&sp, buf, sizeof(buf));
		cr_expect_str_eq(buf, canon, "\"%s\"", t[i].text);
		cr_assert_eq(ispec_parse(&again, buf, &d), 0, "%s", d.msg);
		cr_expect_eq(memcmp(&sp, &again, sizeof(sp)), 0, "\"%s\"", buf);
	}
}

/* Each batch stage's range is in its message, with the value. */
Test(ispec, batch_stage_messages)
{
	static const struct {
		const char *text, *want;
	} t[] = {
		{ "decode | center 8 | mixup 0",
		  "column 27: mixup: \"0\" is not an ALPHA in (0, 1000]" },
		{ "decode | center 8 | mixup 1 | cutmix 1 | switch 2",
		  "column 49: switch: \"2\" is not a probability in 0..1" },
		{ "decode | center 8 | label_smoothing 1",
		  "column 37: label_smoothing: \"1\" is not an E in [0, 1)" },
		{ "decode | center 8 | mixup 1 | classes 0",
		  "column 39: classes: \"0\" is not a count N in 1..1000000" },
		{ "decode | center 8 | mixup 1 | pair up",
		  "column 36: pair: \"up\" is not flip or roll" },
		{ "decode | center 8 | cutmix 1 | switch 0.3",
		  "column 32: switch: \"switch\" needs both mixup and cutmix" },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		struct ispec sp;
		struct diag d;

		cr_expect_eq(ispec_parse(&sp, t[i].text, &d), LOADER_EUSAGE);
		cr_expect(strstr(d.msg, t[i].want) != NULL, "want %s in: %s",
			  t[i].want, d.msg);
	}
}

Test(ispec, format_truncates_like_snprintf)
{
	struct ispec sp;
	char small[8];
	int rc;

	cr_assert_eq(ispec_parse(&sp, good[0].text, NULL), 0);
	rc = ispec_format(&sp, small, sizeof(small));
	cr_expect_eq(rc, (int)strlen(good[0].text));
	cr_expect_str_eq(small, "decode ");
	cr_expect_eq(ispec_format(&sp, NULL, 0), rc);
}

Test(ispec, out_shape)
{
	struct ispec sp;
	uint32_t dims[3];

	cr_assert_eq(ispec_parse(&sp, "decode | rrc 224 | f16", NULL), 0);
	cr_expect_eq(ispec_out_shape(&sp, dims), 3);
	cr_expect(dims[0] == 3 && dims[1] == 224 && dims[2] == 224);
	cr_expect_eq(ispec_out_bytes(&sp), 3 * 224 * 224 * 2);
	cr_assert_eq(ispec_parse(&sp, "decode | center 7 | u8 | nhwc", NULL),
		     0);
	ispec_out_shape(&sp, dims);
	cr_expect(dims[0] == 7 && dims[1] == 7 && dims[2] == 3);
	cr_expect_eq(ispec_out_bytes(&sp), 147);
}

/* A bad spec, the column its message names, and the word it quotes. */
struct bad {
	const char *text;
	unsigned col;
	const char *word;
};

static const struct bad bad[] = {
	{ "", 1, "" },
	{ "   ", 1, "" },
	{ "rrc 224", 1, "rrc" },
	{ "decode", 1, "decode" },
	{ "decode | flip 0.5", 10, "flip" },
	{ "decode | rrc 224 | center 224", 20, "center" },
	{ "decode | resize 256 | f32", 10, "resize" },
	{ "decode | resize 256", 10, "resize" },
	{ "decode | resize 256 | flip 0.5 | center 224", 10, "resize" },
	{ "decode | rrc 0", 14, "0" },
	{ "decode | rrc 9000", 14, "9000" },
	{ "decode | center 8193", 17, "8193" },
	{ "decode | rrc +224", 14, "+224" },
	{ "decode | rrc abc", 14, "abc" },
	{ "decode | center 224 | flip 1.5", 28, "1.5" },
	{ "decode | rrc 224 | normalize 0.5,0.5 0.2,0.2,0.2", 30, "0.5,0.5" },
	{ "decode | rrc 224 | normalize 0.5,0.5,0.5 0.2,0,0.2", 42,
	  "0.2,0,0.2" },
	{ "decode | rrc 224 | normalize 0.5,0.5,0.5 1,-1,1", 42, "1,-1,1" },
	{ "decode | rrc 224 | normalize 2,0.5,0.5 1,1,1", 30, "2,0.5,0.5" },
	{ "decode | rrc 224 | normalize", 20, "normalize" },
	{ "decode | rrc 224 | normalize imagenet extra", 30, "imagenet" },
	{ "decode | rrc 224 | normalize imagenet | u8", 41, "u8" },
	{ "decode | rrc 224 | blur 3", 20, "blur" },
	{ "decode | rrc 224 |", 18, "|" },
	{ "decode || rrc 224", 8, "|" },
	{ "| decode | rrc 224", 1, "|" },
	{ "decode | rrc 224 | flip 0.5 | flip 0.5", 31, "flip" },
	{ "decode | decode | rrc 224", 10, "decode" },
	{ "decode | rrc 224 | f32 | f16", 26, "f16" },
	{ "decode | rrc 224 | nchw | f32", 27, "f32" },
	{ "decode | rrc 224 | nchw | nhwc", 27, "nhwc" },
	{ "decode | rrc 224 | resize 256 | center 224", 20, "resize" },
	{ "decode | center 224 | resize 256", 23, "resize" },
	{ "decode | rrc 224 scale 0.5", 18, "scale" },
	{ "decode | rrc 224 scale 0.5 0.2", 28, "0.2" },
	{ "decode | rrc 224 scale 0 1", 24, "0" },
	{ "decode | rrc 224 scale 0.1 1.5", 28, "1.5" },
	{ "decode | rrc 224 ratio 3/0 4/3", 24, "3/0" },
	{ "decode | rrc 224 ratio 1 1 ratio 1 1", 28, "ratio" },
	{ "decode | rrc 224 zoom 2", 18, "zoom" },
	{ "decode | rrc 224 scale 0.5 1 ratio", 30, "ratio" },
	{ "decode | rrc 224 scale 0.5 1 ratio 1 1 scale", 40, "scale" },
	{ "decode | rrc 224 | flip", 20, "flip" },
	{ "decode | rrc 224 | flip nan", 25, "nan" },
	{ "decode | rrc 224 | flip 0x1p-1", 25, "0x1p-1" },
	{ "decode | rrc 224 | flip 0.5 0.5", 29, "0.5" },
	{ "decode 1 | rrc 224", 8, "1" },
	{ "decode | rrc 224 | f16 x", 24, "x" },
	{ "decode\t|\trrc 224 | bogus", 20, "bogus" },
	{ "decode | rrc 224 | "
	  "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	  20, "xxxxxxxxxxxxxxxxxxxxxxxx" },
	{ "decode | center 224 | hue 0.6", 27, "0.6" },
	{ "decode | center 224 | gaussian_blur 4 1 2", 37, "4" },
	{ "decode | center 224 | gaussian_blur 5 0 2", 39, "0" },
	{ "decode | center 224 | gaussian_blur 5 2 1", 41, "1" },
	{ "decode | center 224 | channel_shift 300", 37, "300" },
	{ "decode | center 224 | sharpness", 23, "sharpness" },
	{ "decode | center 224 | equalize 1", 32, "1" },
	{ "decode | center 224 | posterize 9", 33, "9" },
	{ "decode | center 224 | posterize 2.5", 33, "2.5" },
	{ "decode | center 224 | solarize 256", 32, "256" },
	{ "decode | center 224 | brightness -1", 34, "-1" },
	{ "decode | center 224 | jitter 0.4 0.4", 34, "0.4" },
	{ "decode | center 224 | brightness 0.2 q 3", 38, "q" },
	{ "decode | center 224 | brightness 0.2 p 3", 40, "3" },
	{ "decode | center 224 | invert p", 30, "p" },
	{ "decode | center 224 | grayscale 1", 33, "1" },
	{ "decode | brightness 0.2 | center 224", 10, "brightness" },
	{ "decode | center 224 | normalize imagenet | hue 0.1", 44, "hue" },
	{ "decode | center 7 | invert | invert | invert | invert | invert | invert | invert | invert | invert | invert | invert | invert | invert | invert | invert | invert | invert | invert | invert | invert | invert | invert | invert | invert | invert",
	  237, "invert" },
	{ "decode | center 8 | rotate 200", 28, "200" },
	{ "decode | center 8 | rotate", 21, "rotate" },
	{ "decode | center 8 | rotate 10 fill 300", 36, "300" },
	{ "decode | center 8 | rotate 10 fill mirror", 36, "mirror" },
	{ "decode | center 8 | rotate 10 interp cubic", 38, "cubic" },
	{ "decode | center 8 | affine shear 90", 34, "90" },
	{ "decode | center 8 | affine translate 0.1", 38, "0.1" },
	{ "decode | center 8 | affine translate 2 0", 38, "2" },
	{ "decode | center 8 | affine scale 0 1", 34, "0" },
	{ "decode | center 8 | affine zoom 1.2 0.8", 37, "0.8" },
	{ "decode | center 8 | affine rotate 5 rotate 5", 37, "rotate" },
	{ "decode | center 8 | affine spin 5", 28, "spin" },
	{ "decode | center 8 | rotate 5 fill 0 | affine shear 5 fill 1", 59,
	  "1" },
	{ "decode | center 8 | rotate 5 interp bilinear | rotate 5 interp nearest",
	  64, "nearest" },
	{ "decode | center 8 | trivialaugment p 0.5", 36, "p" },
	{ "decode | center 8 | randaugment 2", 33, "2" },
	{ "decode | center 8 | randaugment 0 9", 33, "0" },
	{ "decode | center 8 | randaugment 2 9.5", 35, "9.5" },
	{ "decode | center 8 | autoaugment cifar10", 33, "cifar10" },
	{ "decode | center 8 | randaugment 16 9 | randaugment 16 9 | invert",
	  59, "invert" },
	{ "decode | center 8 | trivialaugmnt", 21, "trivialaugmnt" },
	/* schedules: their syntax, and a value out of range at one epoch */
	{ "decode | center 8 | mixup 1 | classes 3@0..5@4", 39, "3" },
	{ "decode | rrc 160@x", 14, "160@x" },
	{ "decode | rrc 160@5..100@3", 14, "160@5..100@3" },
	{ "decode | rrc 160@5", 14, "160@5" },
	{ "decode | rrc 160@5..", 14, "160@5.." },
	{ "decode | rrc 160@0..192@10/0", 14, "160@0..192@10/0" },
	{ "decode | rrc 160@0..192@100001", 14, "160@0..192@100001" },
	{ "decode | rrc 1@0..2@1..3@2..4@3..5@4..6@5..7@6..8@7..9@8", 14,
	  "1@0..2@1..3@2" },
	{ "decode | center 9000@0..10@5", 17, "9000" },
	{ "decode | center 10@0..9000@5", 17, "9000" },
	{ "decode | center 64 | gaussian_blur 3@0..9@10 0.1 2", 36, "3.6" },
	{ "decode | center 64 | posterize 8@0..0@8", 32, "0" },
	{ "decode | center 64 | flip 0.5@0..2@10", 27, "1.1" },
	{ "decode | center 64 | at", 22, "at" },
	{ "decode | center 64 | at finale", 25, "finale" },
	{ "decode | center 64 | at -1", 25, "-1" },
	{ "decode | center 64 | at 3 | f32", 29, "f32" },
	{ "decode | center 64 | normalize 0.4@0..x,0.4,0.4 0.2,0.2,0.2", 32,
	  "0.4@0..x,0.4,0.4" },
	/* batch stages */
	{ "decode | center 8 | mixup 0", 27, "0" },
	{ "decode | center 8 | mixup 1001", 27, "1001" },
	{ "decode | center 8 | mixup", 21, "mixup" },
	{ "decode | center 8 | mixup 1 2", 29, "2" },
	{ "decode | center 8 | cutmix -1", 28, "-1" },
	{ "decode | center 8 | cutmix 1 | mixup 1", 32, "mixup" },
	{ "decode | center 8 | mixup 1 | switch 0.5", 31, "switch" },
	{ "decode | center 8 | mixup 1 | cutmix 1 | switch 1.5", 49, "1.5" },
	{ "decode | center 8 | pair flip", 21, "pair" },
	{ "decode | center 8 | mixup 1 | pair swap", 36, "swap" },
	{ "decode | center 8 | label_smoothing 1", 37, "1" },
	{ "decode | center 8 | label_smoothing -0.1", 37, "-0.1" },
	{ "decode | center 8 | classes 10", 21, "classes" },
	{ "decode | center 8 | mixup 1 | classes 0", 39, "0" },
	{ "decode | center 8 | mixup 1 | classes 1000001", 39, "1000001" },
	{ "decode | center 8 | mixup 1 | classes 1.5", 39, "1.5" },
	{ "decode | center 8 | mixup 1 | f16", 31, "f16" },
	{ "decode | center 8 | mixup 1 | mixup 1", 31, "mixup" },
	{ "decode | center 8 | mixupp 1", 21, "mixupp" },
};

Test(ispec, bad_specs_name_column_and_word)
{
	for (size_t i = 0; i < NELEM(bad); i++) {
		const struct bad *b = &bad[i];
		struct ispec sp, zero;
		struct diag d;
		char col[32], word[80];
		int rc = ispec_parse(&sp, b->text, &d);

		memset(&zero, 0, sizeof(zero));
		cr_expect_eq(rc, LOADER_EUSAGE, "\"%s\": rc %d", b->text, rc);
		snprintf(col, sizeof(col), "column %u: ", b->col);
		snprintf(word, sizeof(word), "\"%s", b->word);
		cr_expect(strstr(d.msg, col) != NULL, "\"%s\": want %s in: %s",
			  b->text, col, d.msg);
		cr_expect(strstr(d.msg, word) != NULL, "\"%s\": want %s in: %s",
			  b->text, word, d.msg);
		cr_expect_eq(memcmp(&sp, &zero, sizeof(sp)), 0,
			     "\"%s\": spec not cleared", b->text);
	}
	cr_expect_eq(ispec_parse(&(struct ispec){ 0 }, "rrc", NULL),
		     LOADER_EUSAGE, "a NULL diag is allowed");
}

/* The spec of epoch e of text, which ispec_parse() took. */
static struct ispec at_epoch(const char *text, uint32_t e)
{
	struct ispec sp;
	struct diag d;

	cr_assert_eq(ispec_parse_epoch(&sp, text, e, &d), 0, "%s: %s", text,
		     d.msg);
	return sp;
}

/*
 * ffcv-imagenet's progressive resizing for ResNet-50 at 88 epochs
 * (rn50_88_epochs.yaml: min_res 160, max_res 192, start_ramp 65,
 * end_ramp 76): np.interp between the ramp's ends, rounded to the
 * nearest multiple of 32 by np.round, gives 160 up to epoch 70 (5.45 x
 * 32 at 70) and 192 from 71 (5.55 x 32).
 */
Test(ispec, schedule_ffcv_resolution)
{
	const char *text = "decode | rrc 160@65..192@76/32 | flip 0.5 | f16";
	struct ispec sp;
	struct diag d;

	cr_assert_eq(ispec_parse(&sp, text, &d), 0, "%s", d.msg);
	cr_expect(sp.sched);
	cr_expect_eq(sp.size, 160, "epoch 0's values");
	cr_expect_eq(sp.sched_end, 76);
	cr_expect_eq(sp.size_max, 192);
	cr_expect_eq(sp.size_max_epoch, 71);
	for (uint32_t e = 0; e <= 90; e++)
		cr_expect_eq(at_epoch(text, e).size, e <= 70 ? 160 : 192,
			     "epoch %u", e);
	/* the rest of the spec is the same at every epoch */
	sp = at_epoch(text, 80);
	cr_expect(sp.has_flip && sp.flip == 0.5 && sp.dtype == DT_F16);
}

Test(ispec, schedule_values)
{
	/* linear between keys, flat outside, several keys */
	const char *text = "decode | center 64 | brightness "
			   "0.1@10..0.5@20..0.2@30";

	cr_expect_eq(at_epoch(text, 0).ops[0].a[0], 0.1);
	cr_expect_eq(at_epoch(text, 10).ops[0].a[0], 0.1);
	cr_expect_float_eq(at_epoch(text, 15).ops[0].a[0], 0.3, 1e-15);
	cr_expect_eq(at_epoch(text, 20).ops[0].a[0], 0.5);
	cr_expect_float_eq(at_epoch(text, 25).ops[0].a[0], 0.35, 1e-15);
	cr_expect_eq(at_epoch(text, 31).ops[0].a[0], 0.2);
	/* integer arguments round to the nearest, ties to even */
	text = "decode | center 64 | randaugment 2 5@0..15@10";
	cr_expect_eq(at_epoch(text, 1).ops[0].a[1], 6);
	cr_expect_eq(at_epoch(text, 5).ops[0].a[1], 10);
	text = "decode | center 64 | posterize 4@0..5@2";
	cr_expect_eq(at_epoch(text, 1).ops[0].a[0], 4, "4.5 goes to 4");
	text = "decode | center 5@0..6@2";
	cr_expect_eq(at_epoch(text, 1).size, 6, "5.5 goes to 6");
	/* a step keeps the value within its two keys */
	text = "decode | center 40@0..100@10/32";
	cr_expect_eq(at_epoch(text, 1).size, 40, "46 -> 32, kept at 40");
	cr_expect_eq(at_epoch(text, 5).size, 64);
	cr_expect_eq(at_epoch(text, 9).size, 96);
	cr_expect_eq(at_epoch(text, 10).size, 100);
	/* in a comma list, each element on its own */
	text = "decode | center 64 | normalize 0.4@0..0.5@10,0.456,0.406 "
	       "0.229,0.2@0..0.3@10,0.225";
	cr_expect_float_eq(at_epoch(text, 5).mean[0], 0.45, 1e-15);
	cr_expect_eq(at_epoch(text, 5).mean[1], 0.456);
	cr_expect_float_eq(at_epoch(text, 5).std[1], 0.25, 1e-15);
	/* a ratio's keys may be fractions */
	text = "decode | rrc 32 ratio 3/4@0..1@4 4/3";
	cr_expect_eq(at_epoch(text, 0).ratio[0], 3.0 / 4);
	cr_expect_float_eq(at_epoch(text, 2).ratio[0], 0.875, 1e-15);
}

Test(ispec, schedule_at)
{
	const char *text = "decode | rrc 160@65..192@76/32 | at final";
	struct ispec sp;
	struct diag d;

	cr_assert_eq(ispec_parse(&sp, text, &d), 0, "%s", d.msg);
	cr_expect_eq(sp.size, 192);
	cr_expect_eq(sp.size_max, 192, "the ring is sized for that epoch");
	cr_expect(sp.at);
	cr_expect_eq(at_epoch(text, 0).size, 192, "every epoch is final's");
	text = "decode | rrc 160@65..192@76/32 | at 3";
	cr_expect_eq(at_epoch(text, 90).size, 160);
	text = "decode | center 64 | at final";
	cr_expect_eq(at_epoch(text, 7).size, 64, "no schedule: nothing moves");
}

Test(ispec, schedule_errors_name_the_epoch)
{
	struct ispec sp;
	struct diag d;

	cr_expect_eq(ispec_parse(&sp,
				 "decode | center 64 | gaussian_blur "
				 "3@0..9@10 0.1 2",
				 &d),
		     LOADER_EUSAGE);
	cr_expect_str_eq(
		d.msg,
		"column 36: gaussian_blur: \"3.6\" is not an odd kernel size "
		"in 1..31 (the value of schedule \"3@0..9@10\" at epoch 1)");
	/* 17 schedules: one too many */
	cr_expect_eq(ispec_parse(&sp,
				 "decode | center 64 | brightness 1@0..2@1 | "
				 "brightness 1@0..2@1 | brightness 1@0..2@1 | "
				 "brightness 1@0..2@1 | brightness 1@0..2@1 | "
				 "brightness 1@0..2@1 | brightness 1@0..2@1 | "
				 "brightness 1@0..2@1 | brightness 1@0..2@1 | "
				 "brightness 1@0..2@1 | brightness 1@0..2@1 | "
				 "brightness 1@0..2@1 | brightness 1@0..2@1 | "
				 "brightness 1@0..2@1 | brightness 1@0..2@1 | "
				 "brightness 1@0..2@1 | brightness 1@0..2@1",
				 &d),
		     LOADER_EUSAGE);
	cr_expect(strstr(d.msg, "one schedule too many (at most 16") != NULL,
		  "%s", d.msg);
}
