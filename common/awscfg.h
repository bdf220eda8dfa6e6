/*
 * awscfg.h - where an S3-API object store is and whose credentials to
 * use, resolved the way AWS's own tools resolve them, and s3:// URLs.
 *
 * Why in common/: the credentials of a stream are the caller's, so they
 * are resolved in the caller's process, never by the daemon from its
 * own environment. Both callers need it: libloader (a stream on an
 * s3:// dataset; it may include common/ only) and loaderctl (pack,
 * inspect and verify on s3://). This module reads environment variables
 * and two text files, and depends on nothing of ours but diag.
 *
 * Precedence, as the AWS CLI has it:
 *   profile:     the argument, else $AWS_PROFILE, else $AWS_DEFAULT_PROFILE,
 *                else "default";
 *   credentials: $AWS_ACCESS_KEY_ID with $AWS_SECRET_ACCESS_KEY (and
 *                $AWS_SESSION_TOKEN), else the profile's section of the
 *                shared credentials file ($AWS_SHARED_CREDENTIALS_FILE,
 *                else ~/.aws/credentials: "[NAME]"), else the profile's
 *                section of the config file ($AWS_CONFIG_FILE, else
 *                ~/.aws/config: "[default]" or "[profile NAME]"), else
 *                none (anonymous requests, for public buckets); a
 *                profile named by the argument or the environment that
 *                neither file has is an error, as with the AWS CLI;
 *   region:      $AWS_REGION, else $AWS_DEFAULT_REGION, else the config
 *                file's region, else "us-east-1";
 *   endpoint:    $AWS_ENDPOINT_URL_S3, else $AWS_ENDPOINT_URL, else the
 *                config profile's "s3 =" subsection's endpoint_url, else
 *                its endpoint_url, else https://s3.REGION.amazonaws.com;
 *   addressing:  $AWS_S3_ADDRESSING_STYLE (ours: path, virtual or auto),
 *                else the "s3 =" subsection's addressing_style, else auto.
 * A file that does not exist is no error; one that cannot be read, or a
 * value longer than its field, is, and the message names the file and
 * line or the variable.
 */
#ifndef LD_AWSCFG_H
#define LD_AWSCFG_H

#include <stdbool.h>

#include "diag.h"

#define AWS_KEY_MAX	 128  /* access key id, NUL included */
#define AWS_SECRET_MAX	 128  /* secret access key, NUL included */
#define AWS_TOKEN_MAX	 4096 /* session token, NUL included */
#define AWS_REGION_MAX	 64
#define AWS_ENDPOINT_MAX 256 /* scheme://host[:port][/path], no trailing / */
#define AWS_BUCKET_MAX	 64  /* S3 bucket names are 3..63 bytes */
#define AWS_PREFIX_MAX	 1024

enum aws_addressing {
	AWS_ADDR_AUTO = 0, /* virtual-host where the bucket and host allow */
	AWS_ADDR_PATH = 1,
	AWS_ADDR_VIRTUAL = 2,
};

/*
 * A store and the credentials to sign requests to it with. It holds a
 * secret: wipe it with aws_cfg_wipe() when done, and never log it.
 */
struct aws_cfg {
	char access_key[AWS_KEY_MAX]; /* "": anonymous */
	char secret_key[AWS_SECRET_MAX];
	char session_token[AWS_TOKEN_MAX]; /* "": none */
	char region[AWS_REGION_MAX];
	char endpoint[AWS_ENDPOINT_MAX];
	int addressing; /* enum aws_addressing */
};

/*
 * Fill c as described above, for profile (NULL: from the environment).
 * Returns 0, or a negative code with d naming the variable, or the file
 * and line, at fault (LOADER_EUSAGE for a bad value, -errno for a file
 * that cannot be read). On failure c is wiped.
 */
int aws_cfg_resolve(struct aws_cfg *c, const char *profile, struct diag *d);

/* Overwrite c's secrets (and everything else) with zeros. */
void aws_cfg_wipe(struct aws_cfg *c);

/*
 * Whether requests for bucket at c's endpoint name the bucket in the
 * host (virtual-host) rather than in the path. Auto: virtual-host only
 * for a DNS-compatible bucket name (no dots, lower case, 3..63) and an
 * endpoint host that is a name, not an IP address or "localhost".
 */
bool aws_virtual_host(const struct aws_cfg *c, const char *bucket);

/* Whether s starts with "s3://". */
bool aws_is_url(const char *s);

/*
 * Split "s3://BUCKET[/PREFIX]" into bucket and prefix (no leading or
 * trailing '/'; "" when there is none). Returns 0, or LOADER_EUSAGE
 * naming what is wrong in d (not s3://, an empty or invalid bucket
 * name, a part longer than its buffer, "//" or "." ".." segments).
 */
int aws_url_parse(const char *url, char bucket[AWS_BUCKET_MAX],
		  char prefix[AWS_PREFIX_MAX], struct diag *d);

#endif /* LD_AWSCFG_H */
