/*
 * fuzz_tls.c — libFuzzer target for the TLS listeners' input path
 * (src/net/tls.c: mw_tls_conn_feed, the BIO pump the server and /metrics
 * run every read through).
 *
 * Set-up (once): an EC P-256 key and a self-signed certificate made in
 * memory, written to two temporary PEM files and loaded by mw_tls_ctx_new
 * exactly as the daemon loads its own (client certificates optional, the
 * same certificate as CA, so the verify path runs too); and one real
 * ClientHello, from an OpenSSL client over memory BIOs.
 *
 * Input: byte 0 picks the case, byte 1 seeds a xorshift PRNG, the rest is
 * the peer's bytes, fed in PRNG-sized chunks (1..4096):
 *   0  the bytes alone (garbage before any handshake);
 *   1  a prefix of the real ClientHello (truncated at byte 1 * len / 256)
 *      then the bytes: truncated and corrupted handshakes;
 *   2  a full handshake with a real client first, then the bytes as
 *      records on the established connection (application data parsing,
 *      alerts, key updates).
 * Invariants: no crash or leak (ASan); every feed returns 0, 1 (the peer's
 * close_notify), -EPROTO or -ENOMEM; after a failure every feed fails; a feed never yields more
 * plaintext than MW_TLS_MAX_PLAIN_PER_FEED_BYTES; in case 2 the plaintext
 * is never more than the bytes fed.
 */
#include <errno.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net/tls.h"

static mw_tls_ctx_t *CTX;
static SSL_CTX *CLIENT;
static uint8_t HELLO[4096];
static size_t HELLO_LEN;

static void die(const char *what) {
  fprintf(stderr, "fuzz_tls: set-up failed: %s\n", what);
  abort();
}

static void write_pem(char *path, EVP_PKEY *key, X509 *cert) {
  int fd = mkstemp(path);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f) die("mkstemp");
  int ok = key ? PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) : PEM_write_X509(f, cert);
  fclose(f);
  if (!ok) die("PEM write");
}

static void make_ctx(void) {
  EVP_PKEY *key = EVP_EC_gen("P-256");
  X509 *cert = X509_new();
  if (!key || !cert) die("key");
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600L * 24 * 365);
  X509_set_pubkey(cert, key);
  X509_NAME *n = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"fuzz", -1, -1, 0);
  X509_set_issuer_name(cert, n);
  if (!X509_sign(cert, key, EVP_sha256())) die("sign");
  char kp[] = "/tmp/fuzz_tls_keyXXXXXX", cp[] = "/tmp/fuzz_tls_certXXXXXX";
  write_pem(kp, key, NULL);
  write_pem(cp, NULL, cert);
  mw_tls_opts_t o = {.cert_file = cp, .key_file = kp, .ca_file = cp, .client = MW_TLS_CLIENT_OPTIONAL};
  mw_err_t err = {0};
  if (mw_tls_ctx_new(&o, &CTX, &err) < 0) die(err.msg);
  unlink(kp);
  unlink(cp);
  EVP_PKEY_free(key);
  X509_free(cert);
  CLIENT = SSL_CTX_new(TLS_client_method());
  if (!CLIENT) die("client context");
  SSL_CTX_set_verify(CLIENT, SSL_VERIFY_NONE, NULL);
}

/* A client SSL over memory BIOs: *in gets the server's bytes. */
static SSL *client_new(BIO **in, BIO **out) {
  SSL *ssl = SSL_new(CLIENT);
  *in = BIO_new(BIO_s_mem());
  *out = BIO_new(BIO_s_mem());
  if (!ssl || !*in || !*out) die("client");
  SSL_set_bio(ssl, *in, *out);
  SSL_set_connect_state(ssl);
  return ssl;
}

static void make_hello(void) {
  BIO *in, *out;
  SSL *ssl = client_new(&in, &out);
  (void)SSL_do_handshake(ssl);
  int n = BIO_read(out, HELLO, sizeof HELLO);
  if (n <= 0) die("ClientHello");
  HELLO_LEN = (size_t)n;
  SSL_free(ssl);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  make_ctx();
  make_hello();
  return 0;
}

static uint32_t rng(uint32_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

/* One feed, checked. */
static int feed(mw_tls_conn_t *c, const uint8_t *p, size_t n, mw_buf_t *plain, mw_buf_t *wire) {
  bool failed = c->failed;
  size_t before = plain->len;
  int rc = mw_tls_conn_feed(c, p, n, plain, wire, NULL);
  if (rc != 0 && rc != 1 && rc != -EPROTO && rc != -ENOMEM) abort();
  if (failed && rc == 0) abort();
  if (plain->len - before > MW_TLS_MAX_PLAIN_PER_FEED_BYTES) abort();
  return rc;
}

/* A real client and the server shake hands through memory: true when both
 * finished. */
static bool handshake(mw_tls_conn_t *c, mw_buf_t *plain, mw_buf_t *wire) {
  BIO *in, *out;
  SSL *cl = client_new(&in, &out);
  uint8_t buf[16384];
  for (int round = 0; round < 8 && !(c->ready && SSL_is_init_finished(cl)); round++) {
    (void)SSL_do_handshake(cl);
    int n;
    while ((n = BIO_read(out, buf, sizeof buf)) > 0)
      if (feed(c, buf, (size_t)n, plain, wire) < 0) break;
    if (wire->len) BIO_write(in, wire->data, (int)wire->len);
    mw_buf_reset(wire);
  }
  bool ok = c->ready && SSL_is_init_finished(cl);
  SSL_free(cl);
  return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  int mode = data[0] % 3;
  uint32_t seed = 0x9e3779b9u ^ data[1];
  data += 2;
  size -= 2;
  mw_tls_conn_t c;
  if (mw_tls_conn_init(&c, CTX) < 0) return 0;
  mw_buf_t plain = MW_BUF_INIT, wire = MW_BUF_INIT;
  if (mode == 1) feed(&c, HELLO, (size_t)data[-1] * HELLO_LEN / 256, &plain, &wire);
  if (mode == 2 && !handshake(&c, &plain, &wire)) abort(); /* a real client must get through */
  size_t plain0 = plain.len;
  for (size_t at = 0; at < size;) {
    size_t n = 1 + rng(&seed) % 4096;
    if (n > size - at) n = size - at;
    feed(&c, data + at, n, &plain, &wire);
    at += n;
  }
  if (mode == 2 && plain.len - plain0 > size) abort();
  mw_buf_free(&plain);
  mw_buf_free(&wire);
  mw_tls_conn_free(&c);
  return 0;
}
