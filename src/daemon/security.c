/*
 * security.c — configuration to TLS context and credentials (security.h).
 *
 * The certificate and key are read once per start or reload, by OpenSSL,
 * on the loop thread: a few kilobytes of PEM, done between events (a
 * SIGHUP handler already re-reads the configuration file the same way).
 */
#include "daemon/security.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "common/log.h"

static void tls_opts(const mw_config_t *cfg, mw_tls_opts_t *o) {
  const char *cc = cfg->tls_client_cert;
  *o = (mw_tls_opts_t){.cert_file = cfg->tls_cert_file, .key_file = cfg->tls_key_file,
                       .ca_file = cfg->tls_ca_file[0] ? cfg->tls_ca_file : NULL,
                       .client = strcmp(cc, "require") == 0    ? MW_TLS_CLIENT_REQUIRE
                                 : strcmp(cc, "optional") == 0 ? MW_TLS_CLIENT_OPTIONAL
                                                               : MW_TLS_CLIENT_NONE};
}

bool mw_daemon_tls_wanted(const mw_config_t *cfg) {
  bool any = cfg->metrics_tls && cfg->metrics_listen[0];
  for (size_t i = 0; i < cfg->n_listen; i++) any |= cfg->listen_tls[i];
  return any;
}

int mw_daemon_security_load(const mw_config_t *cfg, mw_tls_ctx_t **tls, mw_creds_t **creds, mw_err_t *err) {
  assert(cfg != NULL);
  assert(tls != NULL);
  assert(creds != NULL);
  *tls = NULL;
  *creds = NULL;
  int rc = 0;
  if (mw_daemon_tls_wanted(cfg)) {
    mw_tls_opts_t o;
    tls_opts(cfg, &o);
    rc = mw_tls_ctx_new(&o, tls, err);
  }
  if (rc == 0 && cfg->credentials_file[0]) rc = mw_creds_load(cfg->credentials_file, creds, err);
  if (rc < 0) {
    mw_tls_ctx_free(*tls);
    *tls = NULL;
  }
  return rc;
}

int mw_daemon_security_check(const mw_config_t *cfg, mw_err_t *err) {
  mw_tls_ctx_t *tls = NULL;
  mw_creds_t *creds = NULL;
  int rc = mw_daemon_security_load(cfg, &tls, &creds, err);
  mw_tls_ctx_free(tls);
  mw_creds_free(creds);
  return rc;
}

void mw_daemon_security_reload(const mw_config_t *next, mw_tls_ctx_t *tls, mw_server_t *server) {
  assert(next != NULL);
  mw_err_t err = {0};
  if (tls != NULL) {
    mw_tls_opts_t o;
    tls_opts(next, &o);
    if (mw_tls_ctx_reload(tls, &o, &err) < 0)
      mw_log_err("reload: TLS certificate not reloaded, new handshakes keep the running one: %s", err.msg);
    else
      mw_log_notice("reload: TLS certificate and key re-read from %s (load %u); open connections keep theirs",
                    next->tls_cert_file, mw_tls_ctx_generation(tls));
  } else if (mw_daemon_tls_wanted(next)) {
    mw_log_warn("reload: a tls listener was added; it takes effect after a restart");
  }
  if (server == NULL) return;
  mw_creds_t *creds = NULL;
  mw_err_clear(&err);
  if (next->credentials_file[0] && mw_creds_load(next->credentials_file, &creds, &err) < 0) {
    mw_log_err("reload: credentials not reloaded, the running ones stay: %s", err.msg);
    return;
  }
  mw_server_set_creds(server, creds);
  if (next->credentials_file[0])
    mw_log_notice("reload: credentials re-read from %s (%zu principals)", next->credentials_file,
                  creds ? creds->n : (size_t)0);
}
