/* net_auth.c - cluster key files and the HMAC challenge and response. */
#include "net_auth.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char net_auth_label[] = "rpfs-auth-v1";

/* sodium_init() is itself idempotent and thread-safe. */
int net_auth_init(void)
{
	return sodium_init() < 0 ? -EIO : 0;
}

/* Value of one hex digit, or -1. */
static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Is gid the caller's group, primary or supplementary? */
static int in_group(gid_t gid)
{
	gid_t g[NGROUPS_MAX];
	int n = getgroups(NGROUPS_MAX, g);

	if (gid == getegid())
		return 1;
	for (int i = 0; i < n; i++)
		if (g[i] == gid)
			return 1;
	return 0;
}

/* Who may use a key file of this owner and mode: see net_key_load().
 * @return NULL when the caller may, else why not */
static const char *key_owner_check(const struct stat *st, int shared)
{
	int group_read = shared && st->st_uid == 0 && !(st->st_mode & 027);

	if ((st->st_mode & 077) && !group_read)
		return shared ? "readable or writable by others, or by a group "
				"of a file not owned by root (chmod 600, or "
				"chown root:GROUP and chmod 640)"
			      : "readable or writable by group or others "
				"(chmod 600 it)";
	if (st->st_uid == geteuid())
		return NULL;
	if (group_read && (st->st_mode & 040) && in_group(st->st_gid))
		return NULL;
	return group_read ? "owned by root and we are not in its group"
			  : "owned by another user";
}

/* Read and check a key file; see net_auth.h. Cost: one small read. */
int net_key_load(const char *path, int shared, uint8_t key[NET_KEY_LEN],
		 const char **why)
{
	char buf[2 * NET_KEY_LEN + 3];
	struct stat st;
	ssize_t n;
	int fd, rc = 0;

	*why = "";
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		rc = -errno;
		*why = errno == ENOENT ? "no such file" : "cannot open it";
		return rc == -ENOENT ? -ENOENT : -EACCES;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		*why = "not a regular file";
		rc = -EINVAL;
		goto out_close_fd;
	}
	*why = key_owner_check(&st, shared);
	if (*why) {
		rc = -EPERM;
		goto out_close_fd;
	}
	*why = "";
	n = read(fd, buf, sizeof(buf));
	if (n < 0) {
		*why = "cannot read it";
		rc = -EACCES;
		goto out_close_fd;
	}
	if (n > 2 * NET_KEY_LEN && buf[2 * NET_KEY_LEN] == '\n')
		n--;
	if (n != 2 * NET_KEY_LEN) {
		*why = "expected 64 hex digits";
		rc = -EINVAL;
		goto out_close_fd;
	}
	for (int i = 0; i < NET_KEY_LEN; i++) {
		int hi = hexval(buf[2 * i]), lo = hexval(buf[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			*why = "expected 64 hex digits";
			rc = -EINVAL;
			goto out_wipe;
		}
		key[i] = (uint8_t)(hi << 4 | lo);
	}
out_wipe:
	sodium_memzero(buf, sizeof(buf));
out_close_fd:
	close(fd);
	return rc;
}

/* Create a key file with mode 0600; see net_auth.h. */
int net_key_generate(const char *path, int force)
{
	uint8_t key[NET_KEY_LEN];
	char hex[2 * NET_KEY_LEN + 2];
	int fd, rc = 0;

	randombytes_buf(key, sizeof(key));
	sodium_bin2hex(hex, sizeof(hex), key, sizeof(key));
	hex[2 * NET_KEY_LEN] = '\n';
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW |
			(force ? O_TRUNC : O_EXCL), 0600);
	if (fd < 0) {
		rc = -errno;
		goto out_wipe;
	}
	if (fchmod(fd, 0600) < 0 ||
	    write(fd, hex, 2 * NET_KEY_LEN + 1) != 2 * NET_KEY_LEN + 1 ||
	    fsync(fd) < 0)
		rc = errno ? -errno : -EIO;
	close(fd);
out_wipe:
	sodium_memzero(key, sizeof(key));
	sodium_memzero(hex, sizeof(hex));
	return rc;
}

/* Either key makes the handshake mandatory. */
int net_auth_keyed(const struct net_opts *o)
{
	return o->has_key || o->has_srv_key;
}

/* A client proves the strongest key it holds: see net_auth.h. */
const uint8_t *net_auth_client_key(const struct net_opts *o, uint8_t *cls)
{
	if (o->has_srv_key) {
		*cls = NET_AUTH_KEY_SERVERS;
		return o->srv_key;
	}
	*cls = NET_AUTH_KEY_CLIENTS;
	return o->has_key ? o->key : NULL;
}

/* The server side of the key choice: see net_auth.h. */
int net_auth_server_key(const struct net_opts *o, uint8_t cls,
			const uint8_t **key, int *privileged)
{
	if (cls == NET_AUTH_KEY_SERVERS && o->has_srv_key) {
		*key = o->srv_key;
		*privileged = 1;
		return 0;
	}
	if (cls == NET_AUTH_KEY_CLIENTS && o->has_key) {
		*key = o->key;
		*privileged = !o->has_srv_key;
		return 0;
	}
	return -EACCES;
}

/* Names for log lines. */
const char *net_auth_class_name(uint8_t cls)
{
	return cls == NET_AUTH_KEY_CLIENTS ? "the clients' key" :
	       cls == NET_AUTH_KEY_SERVERS ? "the servers' key" :
					     "an unknown key class";
}

/* Random challenge. */
void net_auth_nonce(uint8_t n[NET_AUTH_NONCE_LEN])
{
	randombytes_buf(n, NET_AUTH_NONCE_LEN);
}

/* HMAC-SHA256(key, label || role || cn || sn). */
void net_auth_mac(const uint8_t key[NET_KEY_LEN], char role,
		  const uint8_t cn[NET_AUTH_NONCE_LEN],
		  const uint8_t sn[NET_AUTH_NONCE_LEN],
		  uint8_t mac[NET_AUTH_MAC_LEN])
{
	crypto_auth_hmacsha256_state st;
	uint8_t r = (uint8_t)role;

	crypto_auth_hmacsha256_init(&st, key, NET_KEY_LEN);
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)net_auth_label,
				      sizeof(net_auth_label) - 1);
	crypto_auth_hmacsha256_update(&st, &r, 1);
	crypto_auth_hmacsha256_update(&st, cn, NET_AUTH_NONCE_LEN);
	crypto_auth_hmacsha256_update(&st, sn, NET_AUTH_NONCE_LEN);
	crypto_auth_hmacsha256_final(&st, mac);
	sodium_memzero(&st, sizeof(st));
}

/* Recompute and compare in constant time. */
int net_auth_check(const uint8_t key[NET_KEY_LEN], char role,
		   const uint8_t cn[NET_AUTH_NONCE_LEN],
		   const uint8_t sn[NET_AUTH_NONCE_LEN],
		   const uint8_t mac[NET_AUTH_MAC_LEN])
{
	uint8_t want[NET_AUTH_MAC_LEN];
	int ok;

	net_auth_mac(key, role, cn, sn, want);
	ok = sodium_memcmp(want, mac, NET_AUTH_MAC_LEN) == 0;
	sodium_memzero(want, sizeof(want));
	return ok ? 0 : -EACCES;
}
