/*
** session_db.h: conversations and KV snapshots in the radiance database.
**
** Every chat is saved as it goes: a session row when it starts, a message
** row per turn (user, reply, tool result) the moment it exists, each write
** one transaction.  A killed process loses at most the write it was in the
** middle of; the database stays whole (SQLite WAL).  Messages form a tree:
** each names its parent, so /retry and /edit add a sibling (a fork) and the
** session's `leaf` says which branch is current; nothing is overwritten.
**
** A KV snapshot is the engine's cache for a token prefix of a conversation
** (rad_engine_seq_snapshot), stored zstd-compressed beside the token ids it
** holds and keyed by the model identity (rad_engine_model_id) and a sha256
** of those ids.  Resuming looks one up instead of evaluating the prompt
** again; one from another model, or one that does not decompress or whose
** ids do not match their hash, is skipped with a notice saying why, and the
** caller evaluates the prompt from the start.
**
** The database is $XDG_DATA_HOME/radiance/radiance.db (else
** ~/.local/share/radiance/radiance.db), shared with model_store.c's
** `models` table and with other radiance processes at the same time (WAL,
** a busy timeout).  The schema, its versions and the rules of the snapshot
** store are in man/radiance-sessions.5, kept in step with the code:
** session_db.c (the connection, schema, sessions), session_messages.c
** (messages, search), session_snapshots.c (snapshots).
**
** Conventions: functions return RAD_OK or a RAD_E_* code with the message
** set (rad_error_message): "PATH: saving a message: database or disk is
** full".  A failed write changes nothing and the handle stays usable, so a
** chat shows the line and carries on.  Times are unix milliseconds.  One
** handle per thread.
*/
#ifndef RAD_SESSION_DB_H
#define RAD_SESSION_DB_H

#include <stddef.h>
#include <stdint.h>

#include "../../engine/sample.h"

#define RAD_SESSION_ID_LEN          16          /* hex characters of a session id */
#define RAD_SESSION_SCHEMA_VERSION  2           /* what this build writes; see radiance-sessions(5) */
#define RAD_SNAPSHOT_BUDGET_DEFAULT (1LL << 30) /* compressed bytes of snapshots kept: 1 GiB */

typedef struct RadSessionDb RadSessionDb;

/* ------------------------------------------------------------ the database */

/* radiance's data folder (malloc'd), where the database and the converted
** models live: $XDG_DATA_HOME/radiance, else $HOME/.local/share/radiance.
** RAD_E_NOTFOUND ("cannot place the WHAT: set XDG_DATA_HOME or HOME") when
** neither variable is set.  model_store.c places its folder with it too. */
int rad_data_dir(const char *what, char **out);
/* The default database path (malloc'd): rad_data_dir's folder/radiance.db. */
int rad_sdb_default_path(char **out);

/* Open (creating the file and its folder when missing) the database at
** path, or at the default path when path is NULL; WAL, a 5 s busy timeout,
** foreign keys on; create or migrate the schema in one transaction.
** RAD_E_UNSUPPORTED when the file's schema is newer than this build knows. */
int rad_sdb_open(const char *path, RadSessionDb **out);
void rad_sdb_close(RadSessionDb *db);
const char *rad_sdb_path(const RadSessionDb *db);

/* Compressed bytes of snapshots to keep; saving prunes the least recently
** used beyond it.  0 means no limit. */
void rad_sdb_set_snapshot_budget(RadSessionDb *db, int64_t bytes);

/* Refuse to grow the database file past about `bytes` (SQLite's
** max_page_count): writes then fail as on a full disk.  A quota; the tests
** use it where they cannot mount a small filesystem. */
int rad_sdb_set_size_limit(RadSessionDb *db, int64_t bytes);

/* PRAGMA integrity_check, foreign_key_check and the full-text index's own
** check.  RAD_OK when all pass, else RAD_E_FORMAT with the first problem. */
int rad_sdb_check(RadSessionDb *db);

/* ------------------------------------------------------------ sessions */

/* What a session is created or updated with.  NULL leaves a field as it is
** (update) or empty (create). */
typedef struct RadSessionFields {
    const char *title;         /* "": named after the first user message */
    const char *model_id;      /* rad_engine_model_id */
    const char *model_name;    /* the MODEL spec the user gave ("qwen3:0.6b") */
    const char *system_prompt; /* "" removes it */
    const char *sampler_json;  /* a JSON object, e.g. rad_session_sampler_json's */
    const char *kind;          /* create: "chat" (NULL) or "run" (a logged one-shot exchange) */
} RadSessionFields;

typedef struct RadSession {
    char id[RAD_SESSION_ID_LEN + 1];
    char *title; /* never NULL; "" until named */
    int64_t created_ms, updated_ms;
    char *model_id, *model_name; /* never NULL; "" when unknown */
    char *system_prompt;         /* NULL: none */
    char *sampler_json;          /* NULL: none */
    int64_t leaf_id;             /* the current branch's last message; 0 when empty */
    int n_messages;              /* every message, forks included */
    char kind[8];                /* "chat" or "run" */
} RadSession;

/* Create a session; its id (16 hex characters) goes to id. */
int rad_session_create(RadSessionDb *db, const RadSessionFields *f, char id[RAD_SESSION_ID_LEN + 1]);
int rad_session_update(RadSessionDb *db, const char *id, const RadSessionFields *f);

/* A full id from a prefix of one (any length, case-insensitive).
** RAD_E_NOTFOUND when none matches, RAD_E_ARG when several do (the message
** names a few). */
int rad_session_resolve(RadSessionDb *db, const char *prefix, char id[RAD_SESSION_ID_LEN + 1]);
/* The session updated last (radiance chat --continue); RAD_E_NOTFOUND when none. */
int rad_session_latest(RadSessionDb *db, char id[RAD_SESSION_ID_LEN + 1]);
/* The same among sessions of one kind ("chat", "run"; NULL: any). */
int rad_session_latest_kind(RadSessionDb *db, const char *kind, char id[RAD_SESSION_ID_LEN + 1]);

/* One session; RAD_E_NOTFOUND when there is none with this id. */
int rad_session_get(RadSessionDb *db, const char *id, RadSession *out);
void rad_session_free(RadSession *s);
/* Sessions, most recently updated first; limit <= 0 for all. */
int rad_session_list(RadSessionDb *db, int limit, RadSession **out, int *n);
/* The same among sessions of one kind (NULL: any). */
int rad_session_list_kind(RadSessionDb *db, const char *kind, int limit, RadSession **out, int *n);
void rad_session_list_free(RadSession *v, int n);

/* Remove a session with its messages and the snapshots it saved. */
int rad_session_remove(RadSessionDb *db, const char *id);

/* ------------------------------------------------------------ messages */

/* One turn.  Written with rad_session_add_message (id, created_ms and
** session_id are then ignored); read back with the strings owned by the
** list they came in. */
typedef struct RadMessage {
    int64_t id;
    int64_t parent_id;                     /* 0: the first message of a branch */
    const char *role;                      /* "system", "user", "assistant", "tool" */
    const char *content;                   /* never NULL when read */
    const char *reasoning;                 /* an assistant turn's thinking, or NULL */
    const char *tool_calls_json;           /* a JSON array, or NULL */
    int n_tokens;                          /* tokens this message takes in the chat format; 0 unknown */
    int prompt_tokens;                     /* a reply: tokens of the prompt it continued */
    int prompt_evaluated;                  /* a reply: of those, evaluated (the rest came from the KV) */
    int completion_tokens;                 /* a reply: tokens generated */
    double prefill_ms, ttft_ms, decode_ms; /* a reply's timings */
    const char *finish;                    /* a reply: "stop", "length", "interrupted"; NULL otherwise */
    const char *sampler_json;              /* the settings a reply was sampled with, or NULL */
    const char *model_id;                  /* the model that wrote a reply, or NULL */
    const char *model_name;
    int64_t created_ms;
} RadMessage;

typedef struct RadMessageList {
    RadMessage *v;
    int n;
} RadMessageList;

/* With rad_session_add_message: hang the message under the current leaf. */
#define RAD_PARENT_LEAF (-1)

/* Add a message under `parent` (a message of this session, 0 for a new
** root, or RAD_PARENT_LEAF) and make it the session's leaf; the session's
** updated time moves, and an untitled session takes its title from its
** first user message.  /retry is a new reply under the same user message;
** /edit a new user message under the edited one's parent.
** RAD_E_ARG for an unknown role, JSON that does not parse, or a parent
** from another session; RAD_E_NOTFOUND for an unknown session. */
int rad_session_add_message(RadSessionDb *db, const char *session_id, int64_t parent, const RadMessage *m,
                            int64_t *id_out);

/* Rewrite a message's content, reasoning, tool calls, counts, timings and
** finish (a reply saved while it streams, then when it ends).  Its place in
** the tree, role and time stay. */
int rad_session_update_message(RadSessionDb *db, int64_t id, const RadMessage *m);

/* Take back message id, which must be its branch's last (no replies under
** it): a user turn the model refused (too long for the context).  The
** session's leaf goes back to its parent.  RAD_E_ARG when it has children,
** RAD_E_NOTFOUND when there is no such message in the session. */
int rad_session_delete_message(RadSessionDb *db, const char *session_id, int64_t id);

/* Make the branch ending at (or passing through) message `leaf` current.
** Through: the branch continues down its newest children. */
int rad_session_set_leaf(RadSessionDb *db, const char *session_id, int64_t leaf);

/* The branch from its root to leaf (0: the current leaf), in order. */
int rad_session_branch(RadSessionDb *db, const char *session_id, int64_t leaf, RadMessageList *out);
/* Every message of a session, forks included, oldest first. */
int rad_session_messages(RadSessionDb *db, const char *session_id, RadMessageList *out);
void rad_message_list_free(RadMessageList *l);

/* Sampler settings as the JSON object sessions and messages store (malloc'd;
** NULL when out of memory): temperature, top_k, top_p, min_p,
** repeat_penalty, repeat_last_n, seed (a string when past INT64_MAX). */
char *rad_session_sampler_json(const RadSamplerParams *p);

/* ------------------------------------------------------------ search */

typedef struct RadSearchHit {
    char session_id[RAD_SESSION_ID_LEN + 1];
    char *title;
    int64_t message_id;
    char *role;
    char *snippet; /* the words around the match, the terms between mark_open and mark_close */
    int64_t created_ms;
} RadSearchHit;

/* Full-text search (FTS5) of message contents: every word of `text` must
** occur (each word matched as written, quotes and operators taken
** literally; a word ending in '*' matches as a prefix).  Best matches
** first; limit <= 0 for all. */
int rad_session_search(RadSessionDb *db, const char *text, const char *mark_open, const char *mark_close,
                       int limit, RadSearchHit **out, int *n);
/* The same in sessions of one kind (NULL: any). */
int rad_session_search_kind(RadSessionDb *db, const char *kind, const char *text, const char *mark_open,
                            const char *mark_close, int limit, RadSearchHit **out, int *n);
void rad_search_hits_free(RadSearchHit *v, int n);

/* ------------------------------------------------------------ KV snapshots */

/* Save the engine's blob for the first n ids of a conversation under the
** model's identity, replacing one already stored for the same (model,
** ids).  session_id (may be NULL) ties it to a session: removing the
** session removes it, and it supersedes that session's snapshots of shorter
** prefixes of the same ids for the same model (they are deleted).  Then the
** least recently used snapshots beyond the budget are pruned (never this
** one). */
int rad_snapshot_save(RadSessionDb *db, const char *model_id, const char *session_id, const int32_t *tokens,
                      int n, const void *blob, size_t size);

typedef enum RadSnapshotStatus {
    RAD_SNAPSHOT_FOUND = 0, /* out holds a usable snapshot */
    RAD_SNAPSHOT_NONE,      /* none is stored for this model and these ids */
    RAD_SNAPSHOT_IGNORED    /* some matched but cannot be used: the notice says why */
} RadSnapshotStatus;

typedef struct RadSnapshot {
    int64_t id;
    void *data; /* the engine's blob, decompressed (for rad_engine_seq_restore) */
    size_t size;
    int32_t *tokens; /* the ids its positions hold */
    int n_tokens;
    int64_t created_ms;
} RadSnapshot;

/* The snapshot of the longest stored prefix of tokens[0..n) for model_id.
** A candidate that does not decompress, or whose ids do not match their
** hash, is skipped (and deleted: it can never be used) and the next shorter
** one tried.  *status says what happened; notice (cap bytes, may be NULL)
** gets one line for the user whenever something was skipped or nothing
** matched: "KV snapshot ignored (corrupt: ...); the prompt is evaluated
** again".  Only database errors return non-zero.
**
** The caller restores out->data with rad_engine_seq_restore (or
** rad_conv_restore), which refuses a blob of another model, build or KV
** encoding; it then shows the engine's message the same way and evaluates
** the prompt.  With n_tokens == n every position is restored: truncate one
** back before evaluating, so the last token yields logits. */
int rad_snapshot_find(RadSessionDb *db, const char *model_id, const int32_t *tokens, int n, RadSnapshot *out,
                      RadSnapshotStatus *status, char *notice, size_t cap);
/* The newest snapshot a session saved for model_id (resuming it); the same
** checks.  When the session's snapshots are all of other models the status
** is RAD_SNAPSHOT_IGNORED and the notice names the model they were made by. */
int rad_snapshot_find_session(RadSessionDb *db, const char *session_id, const char *model_id,
                              RadSnapshot *out, RadSnapshotStatus *status, char *notice, size_t cap);
void rad_snapshot_free(RadSnapshot *s);

/* Delete one snapshot: one the engine refused as another model's or as
** truncated (RAD_E_FORMAT), so the next resume does not try it again.  Keep
** one refused only for not fitting this context (it fits a larger one). */
int rad_snapshot_remove(RadSessionDb *db, int64_t id);

/* Delete the least recently used snapshots until their compressed bytes fit
** the budget (0: delete all).  *freed (may be NULL) gets the bytes deleted. */
int rad_snapshot_prune(RadSessionDb *db, int64_t budget, int64_t *freed);

/* How many snapshots, and their compressed and raw bytes, for a session (or
** all with NULL). */
int rad_snapshot_usage(RadSessionDb *db, const char *session_id, int *count, int64_t *stored_bytes,
                       int64_t *raw_bytes);

/* sha256 of the ids as little-endian int32s, 64 hex characters (the key). */
void rad_snapshot_key(const int32_t *tokens, int n, char hex[65]);

#endif /* RAD_SESSION_DB_H */
