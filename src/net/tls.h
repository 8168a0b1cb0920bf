/*
 * tls.h — TLS for the producers' and /metrics listeners (OpenSSL, memory
 * BIOs on top of libuv streams).
 *
 * Owns: the server context (mw_tls_ctx_t: certificate chain, key, client
 * CA, protocol and cipher policy) and one connection's TLS state
 * (mw_tls_conn_t: an SSL object between two memory BIOs). Nothing here does
 * I/O: the caller feeds the bytes it read (mw_tls_conn_feed) and gets back
 * the plaintext they carried plus the bytes to send (handshake records,
 * alerts, key updates); it encrypts replies with mw_tls_conn_write. So no
 * call blocks the loop, and the fuzz target drives the same path with no
 * socket at all.
 *
 * Policy: TLS 1.2 and 1.3 only; TLS 1.2 with ECDHE and AEAD ciphers only
 * (forward secrecy, no CBC); no compression, no renegotiation. Client
 * certificates: none (never asked), optional (asked, verified against
 * ca_file when sent) or require (a connection without one fails the
 * handshake).
 *
 * Reload (SIGHUP): mw_tls_ctx_reload builds a new SSL_CTX from the files
 * and swaps it in only when it loads whole; connections keep the context
 * they started with (OpenSSL counts its references), new handshakes use the
 * new one. A failed reload keeps the running context and says why.
 *
 * Errors: negative errno (-EPROTO: the peer broke the protocol or the
 * handshake failed; -EINVAL: a file did not load) with the reason, OpenSSL's
 * own words included, in *err.
 */
#ifndef MW_NET_TLS_H
#define MW_NET_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"
#include "common/err.h"

#define MW_TLS_SUBJECT_BYTES 256 /* a client certificate's subject, RFC 2253 text */
/* Plaintext taken out of one feed at most: a read chunk carries less (TLS
 * records only grow what they carry). */
#define MW_TLS_MAX_PLAIN_PER_FEED_BYTES ((size_t)1 << 20)

typedef enum { MW_TLS_CLIENT_NONE = 0, MW_TLS_CLIENT_OPTIONAL, MW_TLS_CLIENT_REQUIRE } mw_tls_client_t;

typedef struct mw_tls_opts {
  const char *cert_file; /* PEM: the certificate, then its chain */
  const char *key_file;  /* PEM: its private key */
  const char *ca_file;   /* PEM: CAs client certificates are checked against (or NULL) */
  mw_tls_client_t client;
} mw_tls_opts_t;

typedef struct mw_tls_ctx mw_tls_ctx_t;

typedef struct mw_tls_conn {
  void *ssl;        /* SSL * */
  void *in, *out;   /* BIO *: bytes read from the peer, bytes to send it */
  bool ready;       /* handshake finished */
  bool failed;      /* a fatal error: nothing more is read */
  bool peer_closed; /* the peer's close_notify came: it sends nothing more */
} mw_tls_conn_t;

/* Load the files (o->cert_file and o->key_file required). */
int mw_tls_ctx_new(const mw_tls_opts_t *o, mw_tls_ctx_t **out, mw_err_t *err);
/* Load o's files again (new paths allowed); on failure the running
 * context stays and *err says why. */
int mw_tls_ctx_reload(mw_tls_ctx_t *t, const mw_tls_opts_t *o, mw_err_t *err);
void mw_tls_ctx_free(mw_tls_ctx_t *t);
/* How many times the context was loaded (1 + successful reloads). */
unsigned mw_tls_ctx_generation(const mw_tls_ctx_t *t);

/* A server side connection on t's current context. -ENOMEM. */
int mw_tls_conn_init(mw_tls_conn_t *c, mw_tls_ctx_t *t);
void mw_tls_conn_free(mw_tls_conn_t *c);
/* The peer's bytes: advance the handshake and take every whole record's
 * plaintext (appended to *plain); whatever must go to the peer is appended
 * to *wire (send it even when this fails: it may be an alert). 0; 1 when
 * the peer's close_notify came after that plaintext (its end of stream:
 * replies may still be written); or -EPROTO with the reason. */
int mw_tls_conn_feed(mw_tls_conn_t *c, const void *data, size_t n, mw_buf_t *plain, mw_buf_t *wire,
                     mw_err_t *err);
/* Encrypt n bytes (the handshake must be done), records appended to *wire. */
int mw_tls_conn_write(mw_tls_conn_t *c, const void *data, size_t n, mw_buf_t *wire, mw_err_t *err);
/* The close_notify alert, appended to *wire. */
int mw_tls_conn_close_notify(mw_tls_conn_t *c, mw_buf_t *wire);
/* Received bytes held back: a partial record waiting for its rest. */
size_t mw_tls_conn_buffered(const mw_tls_conn_t *c);
/* The verified client certificate's subject (RFC 2253) in out: 1; no
 * verified certificate: 0 (out ""). */
int mw_tls_conn_peer_subject(const mw_tls_conn_t *c, char *out, size_t n);
/* "TLSv1.3 TLS_AES_256_GCM_SHA384" of a finished handshake. */
void mw_tls_conn_describe(const mw_tls_conn_t *c, char *out, size_t n);

/* SHA-256 of n bytes (credentials keep tokens hashed). */
void mw_tls_sha256(const void *data, size_t n, unsigned char out[32]);
/* n random bytes from OpenSSL's CSPRNG: 0 or -EIO. */
int mw_tls_random(void *out, size_t n);

#endif
