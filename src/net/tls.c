/*
 * tls.c — the OpenSSL side of tls.h: the context policy and the BIO pump.
 *
 * A connection is an SSL object in server mode between two memory BIOs:
 * `in` takes what the socket read, `out` collects what must be sent. Each
 * feed writes the bytes into `in`, runs the handshake until it finishes or
 * wants more input, then SSL_read()s every whole record into the caller's
 * plaintext buffer, and finally moves everything `out` holds (handshake
 * flights, session tickets, key update answers, alerts) into the caller's
 * wire buffer. Writes are SSL_write() of the whole buffer (partial writes
 * are enabled: a memory BIO never refuses bytes) and the same move.
 *
 * OpenSSL keeps its errors in a per-thread queue: every entry point clears
 * it first, so one connection's failure never shows in another's message.
 *
 * The context: SSL_CTX with TLS 1.2 minimum, ECDHE+AEAD suites for 1.2
 * (1.3's defaults are all AEAD), no compression, no renegotiation, server
 * cipher preference, the certificate chain and key checked against each
 * other, and for client certificates the CA file both as trust store and
 * as the list of acceptable issuers sent to clients. The reloadable handle
 * holds the current SSL_CTX; SSL_new takes a reference, so swapping and
 * freeing the old one never touches connections that use it.
 */
#include "net/tls.h"

#include <assert.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TLS12_CIPHERS "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!eNULL"
#define MOVE_CHUNK_BYTES 16384
/* Ciphertext written into the in BIO at once: about one full record
 * (16 KiB + header + AEAD tag), so the BIO's buffer stays small and is
 * reused, not grown to a whole read (64 KiB) and given back to the kernel
 * each time: with whole reads, page faults zeroing fresh pages were 22 % of
 * the daemon's samples under 16 TLS connections (perf, bench_ingest --tls). */
#define FEED_PIECE_BYTES (16384 + 512)

struct mw_tls_ctx {
  SSL_CTX *cur;
  unsigned generation;
};

/* OpenSSL's oldest queued error as text ("" when none), the queue cleared. */
static void ossl_reason(char *out, size_t n) {
  assert(out != NULL);
  assert(n > 0);
  unsigned long e = ERR_get_error();
  out[0] = '\0';
  if (e != 0) ERR_error_string_n(e, out, n);
  ERR_clear_error();
}

static int ctx_fail(SSL_CTX *ctx, mw_err_t *err, const char *what, const char *file) {
  char why[256];
  ossl_reason(why, sizeof why);
  SSL_CTX_free(ctx);
  return mw_err_set(err, -EINVAL, "tls: %s %s: %s", what, file ? file : "", why[0] ? why : "failed");
}

static int load_client_ca(SSL_CTX *ctx, const mw_tls_opts_t *o, mw_err_t *err) {
  if (o->client == MW_TLS_CLIENT_NONE) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    return 0;
  }
  (void)err;
  if (SSL_CTX_load_verify_locations(ctx, o->ca_file, NULL) != 1) return -EINVAL;
  STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(o->ca_file);
  if (names == NULL) return -EINVAL;
  SSL_CTX_set_client_CA_list(ctx, names);
  int mode = SSL_VERIFY_PEER;
  if (o->client == MW_TLS_CLIENT_REQUIRE) mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
  SSL_CTX_set_verify(ctx, mode, NULL);
  SSL_CTX_set_verify_depth(ctx, 8);
  return 0;
}

static int build(const mw_tls_opts_t *o, SSL_CTX **out, mw_err_t *err) {
  assert(o != NULL);
  assert(out != NULL);
  ERR_clear_error();
  if (!o->cert_file || !o->cert_file[0] || !o->key_file || !o->key_file[0])
    return mw_err_set(err, -EINVAL, "tls: tls_cert_file and tls_key_file are required");
  if (o->client != MW_TLS_CLIENT_NONE && (!o->ca_file || !o->ca_file[0]))
    return mw_err_set(err, -EINVAL, "tls: client certificates (tls_client_cert = %s) need tls_ca_file",
                      o->client == MW_TLS_CLIENT_REQUIRE ? "require" : "optional");
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == NULL) return ctx_fail(NULL, err, "context", NULL);
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_num_tickets(ctx, 0); /* no resumption: nothing to keep, nothing to send */
  if (SSL_CTX_set_cipher_list(ctx, TLS12_CIPHERS) != 1) return ctx_fail(ctx, err, "cipher list", NULL);
  if (SSL_CTX_use_certificate_chain_file(ctx, o->cert_file) != 1)
    return ctx_fail(ctx, err, "certificate", o->cert_file);
  if (SSL_CTX_use_PrivateKey_file(ctx, o->key_file, SSL_FILETYPE_PEM) != 1)
    return ctx_fail(ctx, err, "private key", o->key_file);
  if (SSL_CTX_check_private_key(ctx) != 1)
    return ctx_fail(ctx, err, "the key does not match the certificate", o->key_file);
  if (load_client_ca(ctx, o, err) < 0) return ctx_fail(ctx, err, "client CA file", o->ca_file);
  *out = ctx;
  return 0;
}

int mw_tls_ctx_new(const mw_tls_opts_t *o, mw_tls_ctx_t **out, mw_err_t *err) {
  assert(o != NULL);
  assert(out != NULL);
  *out = NULL;
  mw_tls_ctx_t *t = calloc(1, sizeof *t);
  if (t == NULL) return mw_err_set(err, -ENOMEM, "tls: out of memory");
  int rc = build(o, &t->cur, err);
  if (rc < 0) {
    free(t);
    return rc;
  }
  t->generation = 1;
  *out = t;
  return 0;
}

int mw_tls_ctx_reload(mw_tls_ctx_t *t, const mw_tls_opts_t *o, mw_err_t *err) {
  assert(t != NULL);
  assert(t->cur != NULL);
  SSL_CTX *next = NULL;
  int rc = build(o, &next, err);
  if (rc < 0) return rc;
  SSL_CTX_free(t->cur); /* connections on it keep their reference */
  t->cur = next;
  t->generation++;
  return 0;
}

void mw_tls_ctx_free(mw_tls_ctx_t *t) {
  if (t == NULL) return;
  SSL_CTX_free(t->cur);
  free(t);
}

unsigned mw_tls_ctx_generation(const mw_tls_ctx_t *t) { return t->generation; }

int mw_tls_conn_init(mw_tls_conn_t *c, mw_tls_ctx_t *t) {
  assert(c != NULL);
  assert(t != NULL);
  memset(c, 0, sizeof *c);
  SSL *ssl = SSL_new(t->cur);
  BIO *in = BIO_new(BIO_s_mem()), *out = BIO_new(BIO_s_mem());
  if (ssl == NULL || in == NULL || out == NULL) {
    SSL_free(ssl);
    BIO_free(in);
    BIO_free(out);
    ERR_clear_error();
    return -ENOMEM;
  }
  BIO_set_mem_eof_return(in, -1); /* empty: "retry", not EOF */
  BIO_set_mem_eof_return(out, -1);
  SSL_set_bio(ssl, in, out); /* the SSL owns both */
  SSL_set_accept_state(ssl);
  c->ssl = ssl;
  c->in = in;
  c->out = out;
  return 0;
}

void mw_tls_conn_free(mw_tls_conn_t *c) {
  if (c == NULL || c->ssl == NULL) return;
  SSL_free(c->ssl);
  memset(c, 0, sizeof *c);
}

/* Everything the out BIO holds, appended to *wire. */
static int move_out(mw_tls_conn_t *c, mw_buf_t *wire) {
  BIO *out = c->out;
  size_t pending;
  while ((pending = BIO_ctrl_pending(out)) > 0) {
    size_t take = pending < MOVE_CHUNK_BYTES ? pending : MOVE_CHUNK_BYTES;
    void *dst = mw_buf_extend(wire, take);
    if (dst == NULL) return -ENOMEM;
    int got = BIO_read(out, dst, (int)take);
    assert(got == (int)take);
    (void)got;
  }
  return 0;
}

/* A fatal SSL result: the reason, and the connection marked failed. */
static int conn_fail(mw_tls_conn_t *c, int ret, const char *when, mw_err_t *err) {
  int e = SSL_get_error(c->ssl, ret);
  char why[256];
  ossl_reason(why, sizeof why);
  c->failed = true;
  if (e == SSL_ERROR_ZERO_RETURN) return mw_err_set(err, -EPROTO, "tls: the peer closed TLS (close_notify)");
  long v = SSL_get_verify_result(c->ssl);
  if (v != X509_V_OK && why[0] && strstr(why, "certificate"))
    return mw_err_set(err, -EPROTO, "tls: %s: %s (%s)", when, why, X509_verify_cert_error_string(v));
  return mw_err_set(err, -EPROTO, "tls: %s: %s", when, why[0] ? why : "protocol error");
}

static int handshake(mw_tls_conn_t *c, mw_err_t *err) {
  int r = SSL_do_handshake(c->ssl);
  if (r == 1) {
    c->ready = true;
    return 0;
  }
  int e = SSL_get_error(c->ssl, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return 0;
  return conn_fail(c, r, "handshake", err);
}

static int read_plain(mw_tls_conn_t *c, mw_buf_t *plain, mw_err_t *err) {
  size_t taken = 0;
  while (taken < MW_TLS_MAX_PLAIN_PER_FEED_BYTES) {
    if (mw_buf_reserve(plain, MOVE_CHUNK_BYTES) < 0) return mw_err_set(err, -ENOMEM, "tls: out of memory");
    size_t got = 0;
    int r = SSL_read_ex(c->ssl, plain->data + plain->len, MOVE_CHUNK_BYTES, &got);
    if (r == 1) {
      plain->len += got;
      taken += got;
      continue;
    }
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return 0;
    if (e == SSL_ERROR_ZERO_RETURN) { /* close_notify: the end of its stream, not an error */
      c->peer_closed = true;
      return 1;
    }
    return conn_fail(c, r, "read", err);
  }
  c->failed = true;
  return mw_err_set(err, -EPROTO, "tls: more than %zu plaintext bytes in one read", MW_TLS_MAX_PLAIN_PER_FEED_BYTES);
}

int mw_tls_conn_feed(mw_tls_conn_t *c, const void *data, size_t n, mw_buf_t *plain, mw_buf_t *wire,
                     mw_err_t *err) {
  assert(c != NULL);
  assert(c->ssl != NULL);
  assert(plain != NULL);
  assert(wire != NULL);
  if (c->failed) return mw_err_set(err, -EPROTO, "tls: the connection already failed");
  if (c->peer_closed) return 1; /* anything after close_notify is ignored */
  ERR_clear_error();
  int rc = 0;
  size_t at = 0;
  do { /* a record's worth at a time: the in BIO stays small (see the top) */
    size_t piece = n - at < FEED_PIECE_BYTES ? n - at : FEED_PIECE_BYTES;
    if (piece > 0 && BIO_write(c->in, (const char *)data + at, (int)piece) != (int)piece) {
      c->failed = true;
      return mw_err_set(err, -ENOMEM, "tls: out of memory");
    }
    at += piece;
    if (!c->ready) rc = handshake(c, err);
    if (rc == 0 && c->ready) rc = read_plain(c, plain, err);
  } while (rc == 0 && at < n);
  int mv = move_out(c, wire); /* an alert goes out even after a failure */
  if (rc >= 0 && mv < 0) rc = mw_err_set(err, mv, "tls: out of memory");
  return rc;
}

int mw_tls_conn_write(mw_tls_conn_t *c, const void *data, size_t n, mw_buf_t *wire, mw_err_t *err) {
  assert(c != NULL);
  assert(c->ready);
  assert(wire != NULL);
  if (c->failed) return mw_err_set(err, -EPROTO, "tls: the connection already failed");
  ERR_clear_error();
  size_t done = 0;
  while (done < n) {
    size_t w = 0;
    int r = SSL_write_ex(c->ssl, (const char *)data + done, n - done, &w);
    if (r != 1) return conn_fail(c, r, "write", err);
    done += w;
  }
  return move_out(c, wire) < 0 ? mw_err_set(err, -ENOMEM, "tls: out of memory") : 0;
}

int mw_tls_conn_close_notify(mw_tls_conn_t *c, mw_buf_t *wire) {
  assert(c != NULL);
  assert(c->ssl != NULL);
  if (!c->ready || c->failed) return 0;
  ERR_clear_error();
  (void)SSL_shutdown(c->ssl);
  ERR_clear_error();
  return move_out(c, wire);
}

size_t mw_tls_conn_buffered(const mw_tls_conn_t *c) {
  if (c == NULL || c->in == NULL) return 0;
  return BIO_ctrl_pending(c->in);
}

int mw_tls_conn_peer_subject(const mw_tls_conn_t *c, char *out, size_t n) {
  assert(c != NULL);
  assert(out != NULL);
  assert(n > 0);
  out[0] = '\0';
  if (!c->ready) return 0;
  X509 *peer = SSL_get1_peer_certificate(c->ssl);
  if (peer == NULL) return 0;
  int ok = 0;
  if (SSL_get_verify_result(c->ssl) == X509_V_OK) {
    BIO *b = BIO_new(BIO_s_mem());
    if (b && X509_NAME_print_ex(b, X509_get_subject_name(peer), 0, XN_FLAG_RFC2253) >= 0) {
      int len = BIO_read(b, out, (int)n - 1);
      out[len > 0 ? len : 0] = '\0';
      ok = len > 0;
    }
    BIO_free(b);
  }
  X509_free(peer);
  ERR_clear_error();
  return ok;
}

void mw_tls_conn_describe(const mw_tls_conn_t *c, char *out, size_t n) {
  assert(c != NULL);
  assert(out != NULL);
  if (!c->ready) {
    snprintf(out, n, "handshake unfinished");
    return;
  }
  snprintf(out, n, "%s %s", SSL_get_version(c->ssl), SSL_get_cipher_name(c->ssl));
}

void mw_tls_sha256(const void *data, size_t n, unsigned char out[32]) {
  unsigned int len = 32;
  int ok = EVP_Digest(data, n, out, &len, EVP_sha256(), NULL);
  assert(ok == 1);
  assert(len == 32);
  (void)ok;
}

int mw_tls_random(void *out, size_t n) {
  assert(n < (1u << 20));
  return RAND_bytes(out, (int)n) == 1 ? 0 : -EIO;
}
