/*
 * md5.h — MD5 (RFC 1321) and base64, for S3's Content-MD5 header only
 * (DeleteObjects requires one). Not for anything that needs a secure hash.
 * Pure functions, no allocation, no errors.
 */
#ifndef MW_STORAGE_MD5_H
#define MW_STORAGE_MD5_H

#include <stddef.h>
#include <stdint.h>

#define MW_MD5_BYTES 16
/* base64 of 16 bytes: 24 characters and a NUL */
#define MW_MD5_B64_BYTES 25

void mw_md5(const void *data, size_t len, uint8_t out[MW_MD5_BYTES]);
/* The Content-MD5 value of data: base64 of its MD5, NUL-terminated. */
void mw_md5_base64(const void *data, size_t len, char out[MW_MD5_B64_BYTES]);

#endif
