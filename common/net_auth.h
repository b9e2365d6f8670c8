/*
 * net_auth.h - the cluster key and the HMAC challenge and response every
 * connection goes through before any request is served (when a key is
 * configured). Mutual: each side proves it knows the key.
 *
 *   client -> server  HELLO  client nonce cn
 *   server -> client         server nonce sn, MAC(key, 'S', cn, sn)
 *   client -> server  AUTH   MAC(key, 'C', cn, sn)
 *
 * MAC is HMAC-SHA256 (libsodium) over "rpfs-auth-v1" || role || cn || sn.
 * Nonces are 32 random bytes, so a recorded exchange cannot be replayed.
 * Backends carry these bytes in their own handshake frames.
 */
#ifndef RPFS_NET_AUTH_H
#define RPFS_NET_AUTH_H

#include <stdint.h>

#include "net.h"

#define NET_AUTH_NONCE_LEN 32
#define NET_AUTH_MAC_LEN 32
#define NET_AUTH_ROLE_CLIENT 'C'
#define NET_AUTH_ROLE_SERVER 'S'

/**
 * Initialise libsodium; call once from main() (idempotent, thread-safe).
 * @return 0, -EIO if libsodium cannot initialise
 */
int net_auth_init(void);

/**
 * Load a key file: 64 hex digits and an optional newline, owned by the
 * caller's uid and not readable or writable by group or others.
 * @param[out] why on error, what was wrong, for the log line
 * @return 0, -ENOENT no such file, -EACCES cannot read it, -EPERM mode or
 *	owner too open, -EINVAL content is not a key
 */
int net_key_load(const char *path, uint8_t key[NET_KEY_LEN], const char **why);

/**
 * Write a new random key to path with mode 0600. Refuses to overwrite
 * unless force.
 * @return 0, -EEXIST (exists and !force), -errno from open/write/fsync
 */
int net_key_generate(const char *path, int force);

/** Fill n with random bytes. */
void net_auth_nonce(uint8_t n[NET_AUTH_NONCE_LEN]);

/** Compute the proof of role over the two nonces. */
void net_auth_mac(const uint8_t key[NET_KEY_LEN], char role,
		  const uint8_t cn[NET_AUTH_NONCE_LEN],
		  const uint8_t sn[NET_AUTH_NONCE_LEN],
		  uint8_t mac[NET_AUTH_MAC_LEN]);

/**
 * Check a peer's proof in constant time.
 * @return 0 valid, -EACCES wrong key
 */
int net_auth_check(const uint8_t key[NET_KEY_LEN], char role,
		   const uint8_t cn[NET_AUTH_NONCE_LEN],
		   const uint8_t sn[NET_AUTH_NONCE_LEN],
		   const uint8_t mac[NET_AUTH_MAC_LEN]);

#endif
