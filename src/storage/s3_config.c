/*
 * s3_config.c — an S3 storage's settings: s3://BUCKET[/PREFIX] and the
 * configuration (storage.h, mw_storage_s3_config_t), each falling back to
 * the AWS environment variables (AWS_REGION, AWS_ENDPOINT_URL_S3,
 * AWS_ACCESS_KEY_ID, ...), resolved once at open into the base URL,
 * SigV4 scope, credentials and limits the exchanges use.
 *
 * Checked here, each with a reason naming the URI: the bucket name, the
 * prefix (a valid key path), the region, the endpoint (scheme://host[:port],
 * plain HTTP only when allowed), credentials present. Path-style URLs
 * (endpoint/bucket) are the default with an explicit endpoint, virtual-host
 * (bucket.endpoint) with AWS's. Reasons and logs never show a secret; the
 * secret key and session token are wiped when freed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "storage/s3_int.h"

static const char *env_first(const char *a, const char *b) {
  const char *v = a ? getenv(a) : NULL;
  if (v != NULL && v[0] != '\0') return v;
  v = b ? getenv(b) : NULL;
  return v != NULL && v[0] != '\0' ? v : NULL;
}

static bool env_true(const char *name) {
  const char *v = getenv(name);
  return v != NULL &&
         (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcasecmp(v, "yes") == 0);
}

static bool bucket_ok(const char *b, size_t n) {
  if (n < 3 || n > 63) return false;
  for (size_t i = 0; i < n; i++) {
    char c = b[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_'))
      return false;
  }
  return true;
}

void mw_s3__config_free(mw_s3_t *s) {
  if (s == NULL) return;
  free(s->bucket);
  free(s->prefix);
  free(s->base);
  free(s->region);
  free(s->ak);
  if (s->sk != NULL) explicit_bzero(s->sk, strlen(s->sk));
  if (s->token != NULL) explicit_bzero(s->token, strlen(s->token));
  free(s->sk);
  free(s->token);
  s->bucket = s->prefix = s->base = s->region = s->ak = s->sk = s->token = NULL;
}

/* s3://BUCKET[/PREFIX] and the settings -> s; reasons never show secrets. */
int mw_s3__config_resolve(mw_s3_t *s, const mw_storage_config_t *cfg, const char *uri,
                          mw_err_t *err) {
  const char *b = uri + 5, *slash = strchr(b, '/');
  size_t bn = slash ? (size_t)(slash - b) : strlen(b);
  if (!bucket_ok(b, bn))
    return mw_err_set(err, -EINVAL, "storage: %s: bad bucket name (3-63 of a-z 0-9 . - _)", uri);
  const char *pre = slash ? slash + 1 : "";
  size_t pn = strlen(pre);
  while (pn > 0 && pre[pn - 1] == '/') pn--;
  if ((s->bucket = strndup(b, bn)) == NULL || (s->prefix = strndup(pre, pn)) == NULL)
    return mw_err_set(err, -ENOMEM, "storage: out of memory");
  if (pn > 0 && !mw_storage_key_valid(s->prefix))
    return mw_err_set(err, -EINVAL, "storage: %s: the prefix is not a valid key path", uri);
  const mw_storage_s3_config_t *c = &cfg->s3;
  const char *region = c->region ? c->region : env_first("AWS_REGION", "AWS_DEFAULT_REGION");
  if (region == NULL) region = "us-east-1";
  const char *endpoint = c->endpoint ? c->endpoint : env_first("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL");
  const char *ak = c->access_key_id ? c->access_key_id : env_first("AWS_ACCESS_KEY_ID", NULL);
  const char *sk = c->secret_access_key ? c->secret_access_key : env_first("AWS_SECRET_ACCESS_KEY", NULL);
  const char *tok = c->session_token ? c->session_token : env_first("AWS_SESSION_TOKEN", NULL);
  if (ak == NULL || sk == NULL)
    return mw_err_set(err, -EACCES, "storage: %s: no S3 credentials (set AWS_ACCESS_KEY_ID and "
                      "AWS_SECRET_ACCESS_KEY)", uri);
  if (strlen(region) > 40 || strchr(region, ':') != NULL)
    return mw_err_set(err, -EINVAL, "storage: %s: bad region '%.40s'", uri, region);
  bool allow_http = c->allow_http > 0 || (c->allow_http < 0 && env_true("AWS_ALLOW_HTTP"));
  int path_style = c->path_style >= 0 ? c->path_style : endpoint != NULL;
  char aws[128];
  if (endpoint == NULL) {
    snprintf(aws, sizeof aws, "https://s3.%s.amazonaws.com", region);
    endpoint = aws;
  }
  bool http = strncmp(endpoint, "http://", 7) == 0;
  if (!http && strncmp(endpoint, "https://", 8) != 0)
    return mw_err_set(err, -EINVAL, "storage: %s: endpoint %s is neither http:// nor https://", uri,
                      endpoint);
  if (http && !allow_http)
    return mw_err_set(err, -EPERM, "storage: %s: endpoint %s is plain HTTP; allow it with "
                      "s3_allow_http = true (or AWS_ALLOW_HTTP=true)", uri, endpoint);
  const char *host = endpoint + (http ? 7 : 8);
  size_t hn = strlen(host);
  while (hn > 0 && host[hn - 1] == '/') hn--;
  if (hn == 0 || memchr(host, '/', hn) != NULL)
    return mw_err_set(err, -EINVAL, "storage: %s: endpoint %s must be scheme://host[:port]", uri,
                      endpoint);
  char base[1024];
  int n = path_style ? snprintf(base, sizeof base, "%s%.*s/%s", http ? "http://" : "https://", (int)hn,
                                host, s->bucket)
                     : snprintf(base, sizeof base, "%s%s.%.*s", http ? "http://" : "https://",
                                s->bucket, (int)hn, host);
  if (n < 0 || (size_t)n >= sizeof base) return mw_err_set(err, -ENAMETOOLONG, "storage: endpoint too long");
  snprintf(s->sigv4, sizeof s->sigv4, "aws:amz:%s:s3", region);
  if ((s->base = strdup(base)) == NULL || (s->region = strdup(region)) == NULL ||
      (s->ak = strdup(ak)) == NULL || (s->sk = strdup(sk)) == NULL ||
      (tok != NULL && (s->token = strdup(tok)) == NULL))
    return mw_err_set(err, -ENOMEM, "storage: out of memory");
  s->part_bytes = c->part_bytes ? c->part_bytes : MW_S3_DEFAULT_PART_BYTES;
  if (s->part_bytes < MW_S3_MIN_PART_BYTES) s->part_bytes = MW_S3_MIN_PART_BYTES;
  s->timeout_ms = c->request_timeout_ms ? c->request_timeout_ms : MW_S3_DEFAULT_TIMEOUT_MS;
  s->deadline_ms = c->retry_deadline_ms ? c->retry_deadline_ms : MW_S3_DEFAULT_DEADLINE_MS;
  mw_log_debug("storage: %s: S3 endpoint %.*s%.*s, bucket %s, prefix '%s', region %s, %s-style, "
              "credentials from %s%s", uri, http ? 7 : 8, endpoint, (int)hn, host, s->bucket,
              s->prefix, region, path_style ? "path" : "virtual-host",
              c->access_key_id ? "the configuration" : "the environment",
              tok ? " with a session token" : "");
  return 0;
}
