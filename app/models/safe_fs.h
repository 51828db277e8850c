/*
** safe_fs.h: file operations in folders other people may write into.
**
** The Hugging Face cache may be shared between users (HF_HOME on a group
** disk), and what a hostile download or another program left there must
** never turn a write of ours into a write elsewhere.  So below a trusted
** root (the folder the user named: HF_HUB_CACHE, the model store), every
** operation here:
**
**   - walks the path one folder at a time with openat(O_NOFOLLOW |
**     O_DIRECTORY), so a symlink standing where a folder should be is
**     refused, naming it, and nothing is created beyond it;
**   - opens files with O_NOFOLLOW and checks they are regular files with one
**     link (a hard link to someone else's file is refused too);
**   - creates temporary files with an unpredictable name (getrandom) and
**     O_CREAT | O_EXCL, and moves them into place with renameat in the same
**     folder.
** The root itself is taken as it is (it may be a link the user made to
** another disk) and made, with its parents, when missing.
**
** Paths are absolute and must be the root or below it.  Every function
** returns 0 (or a descriptor), or a negative RAD_E_* with a message that
** names the path and what to do.
*/
#ifndef RAD_SAFE_FS_H
#define RAD_SAFE_FS_H

#include <stddef.h>
#include <sys/stat.h>

/* Open the folder `path` inside `root`, making missing folders (0755) when
** `create`.  Returns the descriptor (close it), RAD_E_NOTFOUND (absent and
** not create), RAD_E_IO (a link or a non-folder on the way, naming it). */
int rad_sfs_open_dir(const char *root, const char *path, int create);

/* lstat of `path` inside root, through safe folders.  0, RAD_E_NOTFOUND
** (absent, no message), or the refusal of a folder on the way. */
int rad_sfs_lstat(const char *root, const char *path, struct stat *st);

/* Open the regular file `path` (flags as open(2): O_RDONLY, or O_RDWR |
** O_CREAT...; mode for a new file), refusing a link, anything but a
** regular file, or a file with more than one link.  Missing parents are
** made when flags has O_CREAT.  Returns the descriptor, RAD_E_NOTFOUND
** (absent, no O_CREAT, no message) or RAD_E_IO. */
int rad_sfs_open_file(const char *root, const char *path, int flags, int mode);

/* The SQLite database `path` and the files SQLite keeps beside it
** (PATH-wal, PATH-shm, PATH-journal), which it opens following links:
** each must be absent or a regular file with one link, else it is refused
** by name (RAD_E_IO).  Checked before every open of the database. */
int rad_sfs_check_db(const char *path);

/* Replace `path` with `len` bytes, through a temporary file renamed into
** place; refuses when `path` is a link or not a regular file. */
int rad_sfs_write_file(const char *root, const char *path, const void *data, size_t len);

/* Make `path` a symlink to `target`, atomically (the old link or file is
** replaced; a folder is refused). */
int rad_sfs_symlink(const char *root, const char *path, const char *target);

/* readlink of `path` into buf (NUL-terminated); its length, RAD_E_NOTFOUND
** (absent or not a link, no message) or a refusal. */
int rad_sfs_readlink(const char *root, const char *path, char *buf, size_t cap);

/* Rename `from` to `to`, both in the same folder. */
int rad_sfs_rename(const char *root, const char *from, const char *to);

/* Remove the file or link `path`; absent is fine. */
int rad_sfs_unlink(const char *root, const char *path);

/* A refusal message for `path`, for callers that found a link themselves. */
int rad_sfs_refuse_link(const char *path, const char *what);

#endif /* RAD_SAFE_FS_H */
