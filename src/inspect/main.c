/*
 * memwal-inspect — see what is on disk: decode any artifact of a
 * Lance/MemWAL table, and check a whole table's invariants.
 *
 *   memwal-inspect [OPTIONS] show PATH          one file
 *   memwal-inspect [OPTIONS] show TABLE KEY     object KEY of the table at TABLE
 *   memwal-inspect [OPTIONS] ls TABLE [PREFIX]  every object with its kind
 *   memwal-inspect [OPTIONS] dump TABLE [PREFIX] `show` of every object
 *   memwal-inspect [OPTIONS] verify TABLE       every invariant memwald relies on
 *
 * Why its own binary and not a memwalctl subcommand: memwalctl is the admin
 * socket's client, plain libc, talking to a running daemon; the inspector
 * reads the table's storage directly (through src/storage, like the daemon),
 * needs every codec of src/lance, and is most useful when no daemon runs
 * (after a crash, on a copy, in the crash loop). Keeping them apart keeps
 * memwalctl small and dependency-free. Decoding lives in src/lance; this
 * program only arranges what the codecs return (show.c) and checks it
 * (verify.c).
 *
 * Exit status: 0 ok; 1 a decode failed or verify found problems; 2 usage;
 * 3 the table or object cannot be read.
 */
#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/err.h"
#include "inspect/jtree.h"
#include "inspect/show.h"
#include "inspect/sio.h"
#include "inspect/verify.h"

#ifndef MW_VERSION
#define MW_VERSION "0.1.0"
#endif
#define DEFAULT_ROWS 10

static const char USAGE[] =
    "usage: memwal-inspect [OPTIONS] show PATH\n"
    "       memwal-inspect [OPTIONS] show TABLE KEY\n"
    "       memwal-inspect [OPTIONS] ls TABLE [PREFIX]\n"
    "       memwal-inspect [OPTIONS] dump TABLE [PREFIX]\n"
    "       memwal-inspect [OPTIONS] verify TABLE\n"
    "\n"
    "Decodes what a Lance/MemWAL table holds, read through memwald's storage layer:\n"
    "WAL entries, shard manifests, version hints, dataset manifests (feature flags\n"
    "named, MemWAL index decoded), transaction files, deletion files (roaring and\n"
    "Arrow), _pk_index pages, bloom filters, Lance data files 2.0/2.1/2.2 (columns,\n"
    "pages, encodings, global buffers, zone write seeds checked against the values)\n"
    "and legacy v1 Lance files. The kind comes from the object's name (or --kind).\n"
    "`dump` shows every object (JSON: one array); `verify` walks the whole table and\n"
    "names every problem with its object key.\n"
    "\n"
    "Options:\n"
    "  -j, --json          print JSON (one object; verify: one report) instead of text\n"
    "  -n, --rows N|all    rows, offsets, zones and pages listed per artifact (default 10)\n"
    "  -k, --kind KIND     decode as KIND: wal_entry shard_manifest version_hint\n"
    "                      dataset_manifest transaction deletion_bitmap deletion_arrow\n"
    "                      pk_index_data pk_index_lookup bloom_filter data_file zone_seed\n"
    "  -q, --quiet         verify: print only the problems and the summary\n"
    "  -h, --help          this text;  -V, --version  the version\n"
    "\n"
    "Exit status: 0 ok, 1 decode failure or verify problems, 2 usage, 3 cannot read.\n";

static int usage_error(const char *msg) {
  assert(msg != NULL);
  fprintf(stderr, "memwal-inspect: %s\n%s", msg, USAGE);
  return 2;
}

static void print(const j_t *t, bool json) {
  assert(t != NULL);
  if (json) j_print_json(stdout, t);
  else j_print_text(stdout, t);
}

static int cmd_show(int argc, char **argv, bool json, const mw_show_opts_t *so, const char *kind_name) {
  assert(argv != NULL);
  assert(so != NULL);
  if (argc != 1 && argc != 2) return usage_error("show takes PATH, or TABLE and KEY");
  char root[4096], key[MW_STORAGE_KEY_MAX_BYTES + 1], shown[8192];
  if (argc == 1) {
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s", argv[0]);
    snprintf(b, sizeof b, "%s", argv[0]);
    snprintf(root, sizeof root, "%s", dirname(a));
    snprintf(key, sizeof key, "%s", basename(b));
    snprintf(shown, sizeof shown, "%s", argv[0]);
  } else {
    snprintf(root, sizeof root, "%s", argv[0]);
    snprintf(key, sizeof key, "%s", argv[1]);
    snprintf(shown, sizeof shown, "%s", argv[1]);
  }
  mw_sio_t s;
  mw_err_t err = {0};
  if (mw_sio_open(&s, root, &err) < 0) {
    fprintf(stderr, "memwal-inspect: %s\n", err.msg);
    return 3;
  }
  mw_buf_t bytes = MW_BUF_INIT;
  int rc = mw_sio_get(&s, key, &bytes, &err);
  mw_sio_close(&s);
  if (rc < 0) {
    fprintf(stderr, "memwal-inspect: %s\n", err.msg);
    mw_buf_free(&bytes);
    return 3;
  }
  mw_kind_t kind;
  if (kind_name != NULL) {
    if (mw_kind_parse(kind_name, &kind) < 0) {
      mw_buf_free(&bytes);
      return usage_error("unknown --kind");
    }
  } else {
    kind = mw_kind_of(shown, bytes.data, bytes.len);
  }
  j_t *t = NULL;
  rc = mw_show(shown, kind, bytes.data ? bytes.data : (const uint8_t *)"", bytes.len, so, &t, &err);
  mw_buf_free(&bytes);
  if (rc < 0) {
    fprintf(stderr, "memwal-inspect: %s: %s: %s\n", shown, mw_kind_name(kind), err.msg);
    return 1;
  }
  print(t, json);
  j_free(t);
  return 0;
}

/* The table at root opened and the keys under prefix listed (ls, dump);
 * on failure the reason is printed and nothing is left open. */
static int open_listed(const char *root, const char *prefix, mw_sio_t *s, char ***keys, size_t *n) {
  assert(root != NULL);
  assert(prefix != NULL);
  mw_err_t err = {0};
  if (mw_sio_open(s, root, &err) < 0) {
    fprintf(stderr, "memwal-inspect: %s\n", err.msg);
    return -1;
  }
  if (mw_sio_list(s, prefix, keys, n, &err) < 0) {
    fprintf(stderr, "memwal-inspect: %s\n", err.msg);
    mw_sio_close(s);
    return -1;
  }
  assert(*n == 0 || *keys != NULL);
  return 0;
}

static int cmd_ls(int argc, char **argv, bool json) {
  assert(argv != NULL);
  assert(argc >= 0);
  if (argc != 1 && argc != 2) return usage_error("ls takes TABLE [PREFIX]");
  mw_sio_t s;
  char **keys = NULL;
  size_t n = 0;
  if (open_listed(argv[0], argc == 2 ? argv[1] : "", &s, &keys, &n) < 0) return 3;
  j_t *a = j_arr();
  for (size_t i = 0; i < n; i++) {
    uint64_t size = 0;
    mw_sio_head(&s, keys[i], &size, NULL);
    j_t *o = j_push(a, j_obj());
    j_set(o, "key", j_str(keys[i]));
    j_set(o, "kind", j_str(mw_kind_name(mw_kind_of(keys[i], (const uint8_t *)"", 0))));
    j_set(o, "bytes", j_uint(size));
  }
  mw_sio_close(&s);
  if (json) {
    j_print_json(stdout, a);
  } else {
    for (size_t i = 0; i < a->n; i++)
      printf("%-16s %12llu  %s\n", a->items[i]->items[1]->s, (unsigned long long)a->items[i]->items[2]->u,
             a->items[i]->items[0]->s);
  }
  j_free(a);
  mw_sio_free_keys(keys, n);
  return 0;
}

/* show of every object under prefix; exit 1 when one does not decode. */
static int cmd_dump(int argc, char **argv, bool json, const mw_show_opts_t *so) {
  assert(argv != NULL);
  assert(so != NULL);
  if (argc != 1 && argc != 2) return usage_error("dump takes TABLE [PREFIX]");
  mw_sio_t s;
  mw_err_t err = {0};
  char **keys = NULL;
  size_t n = 0, failed = 0;
  if (open_listed(argv[0], argc == 2 ? argv[1] : "", &s, &keys, &n) < 0) return 3;
  if (json) fputc('[', stdout);
  for (size_t i = 0; i < n; i++) {
    mw_buf_t bytes = MW_BUF_INIT;
    j_t *t = NULL;
    mw_err_clear(&err);
    int rc = mw_sio_get(&s, keys[i], &bytes, &err);
    mw_kind_t kind = mw_kind_of(keys[i], bytes.data ? bytes.data : (const uint8_t *)"", bytes.len);
    if (rc == 0) rc = mw_show(keys[i], kind, bytes.data ? bytes.data : (const uint8_t *)"", bytes.len, so, &t, &err);
    mw_buf_free(&bytes);
    if (rc < 0) {
      fprintf(stderr, "memwal-inspect: %s: %s: %s\n", keys[i], mw_kind_name(kind), err.msg);
      failed++;
      continue;
    }
    if (json) {
      if (i > failed) fputc(',', stdout);
      j_print_json(stdout, t);
    } else {
      printf("--- %s\n", keys[i]);
      j_print_text(stdout, t);
    }
    j_free(t);
  }
  if (json) fputs("]\n", stdout);
  mw_sio_close(&s);
  mw_sio_free_keys(keys, n);
  if (failed) fprintf(stderr, "memwal-inspect: %zu of %zu objects did not decode\n", failed, n);
  return failed ? 1 : 0;
}

int main(int argc, char **argv) {
  assert(argc >= 1);
  assert(argv != NULL);
  static const struct option longopts[] = {
      {"json", no_argument, NULL, 'j'},  {"rows", required_argument, NULL, 'n'},
      {"kind", required_argument, NULL, 'k'}, {"quiet", no_argument, NULL, 'q'},
      {"help", no_argument, NULL, 'h'},  {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0}};
  bool json = false, quiet = false;
  const char *kind = NULL;
  mw_show_opts_t so = {.max_rows = DEFAULT_ROWS};
  int c;
  while ((c = getopt_long(argc, argv, "+jn:k:qhV", longopts, NULL)) != -1) {
    switch (c) {
      case 'j': json = true; break;
      case 'q': quiet = true; break;
      case 'k': kind = optarg; break;
      case 'n': {
        if (strcmp(optarg, "all") == 0) {
          so.max_rows = -1;
          break;
        }
        char *end;
        long long v = strtoll(optarg, &end, 10);
        if (*optarg == 0 || *end != 0 || v < 0) return usage_error("--rows takes a count or `all`");
        so.max_rows = v;
        break;
      }
      case 'h': fputs(USAGE, stdout); return 0;
      case 'V': printf("memwal-inspect %s\n", MW_VERSION); return 0;
      default: return usage_error("unknown option");
    }
  }
  if (optind >= argc) return usage_error("a command is required");
  const char *cmd = argv[optind];
  int rest = argc - optind - 1;
  char **args = argv + optind + 1;
  if (strcmp(cmd, "show") == 0) return cmd_show(rest, args, json, &so, kind);
  if (strcmp(cmd, "ls") == 0) return cmd_ls(rest, args, json);
  if (strcmp(cmd, "dump") == 0) return cmd_dump(rest, args, json, &so);
  if (strcmp(cmd, "verify") == 0) {
    if (rest != 1) return usage_error("verify takes TABLE");
    mw_verify_opts_t vo = {.json = json, .quiet = quiet};
    return mw_verify_main(args[0], &vo);
  }
  return usage_error("unknown command");
}
