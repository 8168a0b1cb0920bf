/*
 * admin.h — the admin socket: a Unix stream socket (mode 0660), one command
 * per connection, one JSON reply, then the socket closes.
 *
 * Owns: the listening socket (a stale socket file is replaced; a live one —
 * something accepts on it — is -EADDRINUSE), command parsing and checking,
 * the reply envelope, and the `metrics` command (rendered from the registry
 * here). Everything else goes to the engine through mw_admin_engine_t.
 *
 * Request: one line, at most MW_ADMIN_MAX_REQUEST_BYTES, words separated by
 * spaces or tabs, "\n" optional (EOF ends it too):
 *   status | metrics | flush [T [S]] | seal T S | unseal T S | drop T S |
 *   drop-table T | claim T S | release T S
 * Reply (one line of JSON, then close):
 *   {"ok":true,"result":<JSON from the engine>}
 *   {"ok":true,"result":{"text":"<Prometheus text>"}}       (metrics)
 *   {"ok":false,"error":"<reason>"}
 * Sample:
 *   $ printf 'seal events 3\n' | socat - UNIX:/run/memwald/admin.sock
 *   {"ok":false,"error":"table events: shard bucket-3 is not owned here"}
 *
 * Errors: negative errno; mw_admin_start names the path in *err.
 */
#ifndef MW_NET_ADMIN_H
#define MW_NET_ADMIN_H

#include <stddef.h>
#include <uv.h>

#include "common/buf.h"
#include "common/err.h"
#include "common/metrics.h"

#define MW_ADMIN_MAX_REQUEST_BYTES 4096
#define MW_ADMIN_MAX_ARGS 4
#define MW_ADMIN_MAX_CONNECTIONS 64
#define MW_ADMIN_READ_TIMEOUT_MS 10000

typedef struct mw_admin_req mw_admin_req_t;

/* The admin commands: the one table of their names, argument counts and
 * usage is admin.c's (mw_admin_command); an engine keys what it does for
 * each by this id. */
typedef enum mw_admin_cmd {
  MW_ADMIN_STATUS,
  MW_ADMIN_METRICS, /* served by admin.c itself */
  MW_ADMIN_FLUSH,
  MW_ADMIN_SEAL,
  MW_ADMIN_UNSEAL,
  MW_ADMIN_DROP,
  MW_ADMIN_DROP_TABLE,
  MW_ADMIN_CLAIM,
  MW_ADMIN_RELEASE,
  MW_ADMIN_COMPACT,
  MW_ADMIN_FAULT, /* tests only: refused unless MEMWALD_TEST_FAULTS=1 */
  MW_ADMIN_N_COMMANDS
} mw_admin_cmd_t;

typedef struct mw_admin_command {
  const char *name;
  mw_admin_cmd_t id;
  int min_args, max_args; /* words after the name */
  const char *usage;
} mw_admin_command_t;

/* The command called name, or NULL when there is none. */
const mw_admin_command_t *mw_admin_command(const char *name);

/* Finish a command: status 0 with `json` (a JSON value, copied; NULL =
 * `{}`), or a negative errno with a reason for people. Exactly once per
 * command, from the loop thread, now or later. */
void mw_admin_reply(mw_admin_req_t *r, int status, const char *json_or_reason);

typedef struct mw_admin_engine {
  void *data;
  /* argv[0] is the command (already checked: known, right number of
   * arguments); argv[1..argc-1] its words. Call mw_admin_reply on r. */
  void (*command)(void *data, int argc, const char *const *argv, mw_admin_req_t *r);
} mw_admin_engine_t;

typedef struct mw_admin mw_admin_t;

int mw_admin_start(uv_loop_t *loop, const char *path, const mw_admin_engine_t *engine,
                   mw_metrics_t *metrics, mw_admin_t **out, mw_err_t *err);
/* Close the listener (and unlink the socket file) and every connection;
 * commands still running complete into the void. Frees itself when the last
 * handle is closed. */
void mw_admin_stop(mw_admin_t *a);

/* Append s as a JSON string (quotes, escapes) — for engines building replies. */
int mw_admin_json_str(mw_buf_t *out, const char *s);

#endif
