/*
 * iod_crc.h - CRC-32C (Castagnoli), in software, for IO_CSUM: the checksum
 * the scrub compares between replicas. No dependency beyond libc.
 */
#ifndef RPFS_IOD_CRC_H
#define RPFS_IOD_CRC_H

#include <stddef.h>
#include <stdint.h>

/**
 * Continue a CRC-32C over len bytes. Start with crc 0; the result of one
 * call is the crc to pass to the next ("123456789" gives 0xe3069283).
 * Cost: about one table lookup per byte (slicing by 8).
 * @return the CRC-32C of everything fed so far
 */
uint32_t iod_crc32c(uint32_t crc, const void *buf, size_t len);

#endif
