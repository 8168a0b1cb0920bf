/*
 * fuzz_config — the configuration loader on arbitrary file text.
 *
 * The input is split at the first NUL: before it, the INI text (read through
 * fmemopen, as a file would be); after it, NUL-separated `--set` arguments.
 * Invariants: never crash; an error always carries a message; a success
 * prints (--print-config) without trouble and loads again from its own
 * printout to the same listen list (and reply modes), table count and
 * per-table sstable_zstd.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 65536) return 0;
  static mw_config_t cfg, again;
  const uint8_t *nul = memchr(data, 0, size);
  size_t text_len = nul ? (size_t)(nul - data) : size;
  const char *sets[16];
  size_t n_sets = 0;
  char *rest = NULL;
  if (nul != NULL) {
    size_t rest_len = size - text_len - 1;
    rest = malloc(rest_len + 1);
    memcpy(rest, nul + 1, rest_len);
    rest[rest_len] = 0;
    for (char *p = rest; p < rest + rest_len && n_sets < 16; p += strlen(p) + 1) sets[n_sets++] = p;
  }
  FILE *f = fmemopen((void *)(text_len ? data : (const uint8_t *)""), text_len ? text_len : 1, "r");
  if (f != NULL) {
    mw_err_t err = {0};
    int rc = mw_config_load_stream(&cfg, "fuzz.conf", f, sets, n_sets, &err);
    fclose(f);
    if (rc < 0 && err.msg[0] == '\0') abort(); /* every error says why */
    if (rc == 0) {
      char *out = NULL;
      size_t out_len = 0;
      FILE *o = open_memstream(&out, &out_len);
      mw_config_print(&cfg, o);
      fclose(o);
      FILE *in = fmemopen(out, out_len ? out_len : 1, "r");
      mw_err_t err2 = {0};
      /* the printout is valid input unless a value cannot be represented on
       * one INI line (e.g. it starts with a space or holds ';') */
      if (in != NULL && mw_config_load_stream(&again, "printed.conf", in, NULL, 0, &err2) == 0) {
        if (again.n_listen != cfg.n_listen || again.n_tables != cfg.n_tables) abort();
        if (again.replies != cfg.replies) abort(); /* reply modes survive the printout */
        for (size_t i = 0; i < cfg.n_listen; i++)
          if (again.listen_replies[i] != cfg.listen_replies[i]) abort();
        for (size_t i = 0; i < cfg.n_tables; i++)
          if (again.tables[i].sstable_zstd != cfg.tables[i].sstable_zstd) abort();
      }
      if (in != NULL) fclose(in);
      free(out);
    }
  }
  free(rest);
  return 0;
}
