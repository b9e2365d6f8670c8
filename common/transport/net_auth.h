/*
 * net_auth.h - the cluster key and the HMAC challenge and response every
 * connection goes through before any request is served (when a key is
 * configured). Mutual: each side proves it knows the key.
 *
 *   client -> server  HELLO  client nonce cn, class of its key
 *   server -> client         server nonce sn, MAC(key, 'S', cn, sn)
 *   client -> server  AUTH   MAC(key, 'C', cn, sn)
 *
 * MAC is HMAC-SHA256 (libsodium) over "rpfs-auth-v1" || role || cn || sn.
 * Nonces are 32 random bytes, so a recorded exchange cannot be replayed.
 * Backends carry these bytes in their own handshake frames. The class
 * says which key the client proves: the clients' key or the servers' key
 * (net_auth_server_key); the server proves the same one, so a client never
 * learns whether the server holds the other.
 */
#ifndef RPFS_NET_AUTH_H
#define RPFS_NET_AUTH_H

#include <stdint.h>

#include "net.h"

#define NET_AUTH_NONCE_LEN 32
#define NET_AUTH_MAC_LEN 32
#define NET_AUTH_ROLE_CLIENT 'C'
#define NET_AUTH_ROLE_SERVER 'S'

/* Which key a client proves, named in its first handshake message. */
#define NET_AUTH_KEY_CLIENTS 1 /* the clients' key (mounts, librpfs) */
#define NET_AUTH_KEY_SERVERS 2 /* the servers' key (mgr, iods, admin) */
/* A keyed client's first message: its nonce, then the class byte, then
 * (TCP, optional) a flags byte. */
#define NET_AUTH_HELLO_LEN (NET_AUTH_NONCE_LEN + 1)
#define NET_AUTH_HELLO_FLAGS_LEN (NET_AUTH_HELLO_LEN + 1)
#define NET_AUTH_F_ENCRYPT 0x1 /* the client asks for NET_SEAL_AEAD */

/**
 * Initialise libsodium; call once from main() (idempotent, thread-safe).
 * @return 0, -EIO if libsodium cannot initialise
 */
int net_auth_init(void);

/**
 * Load a key file: 64 hex digits and an optional newline. A private key
 * file (the servers' key) must be owned by the caller's uid and closed to
 * group and others. A shared one (the clients' key) may also be a file of
 * root's, readable (not writable) by its group, when the caller is in that
 * group: how non-root librpfs users get the clients' key and nothing more.
 * @param[in] shared 1 for the clients' key, 0 for the servers' key
 * @param[out] why on error, what was wrong, for the log line
 * @return 0, -ENOENT no such file, -EACCES cannot read it, -EPERM mode or
 *	owner too open, -EINVAL content is not a key
 */
int net_key_load(const char *path, int shared, uint8_t key[NET_KEY_LEN],
		 const char **why);

/**
 * Write a new random key to path with mode 0600. Refuses to overwrite
 * unless force.
 * @return 0, -EEXIST (exists and !force), -errno from open/write/fsync
 */
int net_key_generate(const char *path, int force);

/** Does o hold a key, so that every connection must prove one?
 * @return 1 or 0 */
int net_auth_keyed(const struct net_opts *o);

/**
 * The key a client proves: the servers' key when o holds it, else the
 * clients' key.
 * @param[out] cls NET_AUTH_KEY_SERVERS or NET_AUTH_KEY_CLIENTS
 * @return the key, or NULL when o holds none
 */
const uint8_t *net_auth_client_key(const struct net_opts *o, uint8_t *cls);

/**
 * The key a server proves to a client that named class cls, and whether
 * that client may do the servers' work once it proved the key back: yes
 * for the servers' key, and for the clients' key on a server that holds
 * no servers' key (a one-key cluster).
 * @param[out] key the key to prove and check with
 * @param[out] privileged 1 or 0
 * @return 0, -EACCES cls names no class, or a key this server does not hold
 */
int net_auth_server_key(const struct net_opts *o, uint8_t cls,
			const uint8_t **key, int *privileged);

/** "the clients' key" / "the servers' key" / "an unknown key class", for
 * log lines. */
const char *net_auth_class_name(uint8_t cls);

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
