/*
 * security.h — the daemon's TLS context and producers' credentials, from
 * the configuration (docs/security.md).
 *
 * Owns: turning [daemon] tls_* and credentials_file into a net/tls.h
 * context and a net/creds.h set at start, checking them for `memwald
 * --check`, and re-reading both on SIGHUP: new certificate and key for new
 * handshakes (connections keep theirs), new credentials handed to the
 * server (revoked principals refused). A reload that fails keeps what runs
 * and logs why.
 *
 * Errors: negative errno, the key and the reason in *err.
 */
#ifndef MW_DAEMON_SECURITY_H
#define MW_DAEMON_SECURITY_H

#include <stdbool.h>

#include "common/err.h"
#include "daemon/config.h"
#include "net/creds.h"
#include "net/server.h"
#include "net/tls.h"

/* Whether any listener (or metrics_listen) is tls. */
bool mw_daemon_tls_wanted(const mw_config_t *cfg);
/* The TLS context (NULL when no listener is tls) and the credentials
 * (NULL when credentials_file is unset). */
int mw_daemon_security_load(const mw_config_t *cfg, mw_tls_ctx_t **tls, mw_creds_t **creds, mw_err_t *err);
/* --check: load both and free them. */
int mw_daemon_security_check(const mw_config_t *cfg, mw_err_t *err);
/* SIGHUP with the new configuration: certificate files reloaded into tls
 * (when set), credentials re-read into server (when set). Logs each. */
void mw_daemon_security_reload(const mw_config_t *next, mw_tls_ctx_t *tls, mw_server_t *server);

#endif
