/*
 * fs.h — directories on the local filesystem, made with their parents.
 *
 * Owns: nothing; `mkdir -p` for the places that need a directory before
 * they open something in it (storage's local root, the daemon's admin
 * socket's folder).
 *
 * Limits: a path of at most MW_FS_PATH_MAX_BYTES - 1 bytes (longer:
 * -ENAMETOOLONG, nothing made).
 * Errors: the negative errno of the first mkdir that failed for another
 * reason than EEXIST; what it made before stays.
 */
#ifndef MW_COMMON_FS_H
#define MW_COMMON_FS_H

#include <sys/types.h>

#define MW_FS_PATH_MAX_BYTES 4096

/* Makes path and each missing parent with `mode` (before the umask); a
 * path that exists is success. */
int mw_fs_mkdir_p(const char *path, mode_t mode);

#endif
