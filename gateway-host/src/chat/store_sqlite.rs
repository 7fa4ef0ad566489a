//! The embedded session store (SPEC R35): one SQLite file (`sessions.db` under the data folder),
//! compiled in (`rusqlite`, bundled), nothing to install.
//!
//! Durability: WAL journal with `synchronous=NORMAL`, and each turn appended in one `IMMEDIATE`
//! transaction. What R35 asks — a gateway killed (SIGKILL) in the middle of a turn keeps every
//! completed turn and an intact file (`tests/tests/chat.rs` kills it and checks) — holds with
//! `NORMAL`: in WAL mode a commit is written to the WAL file before it returns, so it is in the
//! operating system's page cache and survives the process; only a crash of the OS itself or a
//! power cut could lose the last turns (never corrupt the file: SQLite reads WAL frames only up to
//! the last complete commit, and the WAL is synced at every checkpoint). `FULL` would add one
//! fsync per turn, on the turn's path, for that OS-crash case only; a turn that ran against a
//! model (seconds, most of the time) can be asked again, so we do not pay it.
//!
//! The one connection sits behind a mutex and every call that touches the file runs on tokio's
//! blocking pool, never on a runtime worker. Turn locks are in-process ([`LocalLocks`]): one
//! gateway owns the file — which is also why the model's view of recent sessions can be kept in
//! memory ([`HistoryCache`]): every change to the file goes through this store.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde_json::Value;

use super::store::{is_page_only, model_text, now_ms, starts_turn, ModelHistory, Session, SessionStore, SessionSummary, StoreError, TurnLock, UI_KEY};

/// The schema version kept in `PRAGMA user_version`.
const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    id          TEXT PRIMARY KEY NOT NULL,
    title       TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    turns       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS sessions_by_update ON sessions (updated_at DESC);
CREATE TABLE IF NOT EXISTS messages (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    json        TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
";

fn backend(message: impl std::fmt::Display) -> StoreError {
    StoreError::Backend { store: "sqlite", message: message.to_string() }
}

fn db_err(e: rusqlite::Error) -> StoreError {
    backend(e)
}

pub struct SqliteStore {
    conn: Arc<parking_lot::Mutex<Connection>>,
    /// Changed only while `conn` is held, together with the file (lock order: `conn`, then this).
    cache: Arc<parking_lot::Mutex<HistoryCache>>,
    locks: LocalLocks,
}

/// At most this many bytes of model history are kept in memory, over all sessions…
const CACHE_BYTES: usize = 32 * 1024 * 1024;
/// …in at most this many sessions; the least recently used go first.
const CACHE_SESSIONS: usize = 4096;

/// The model's view of recent sessions ([`SessionStore::model_history`]), so that a turn does not
/// read and parse its session's whole history again: the first turn of a session (since the
/// gateway started) reads it from the file, later turns find it here, and each saved turn is
/// appended to it. It is only ever changed while the connection is held and in step with the
/// file (a commit appends, a delete removes), so it never disagrees with the file; reading it
/// needs only its own lock.
#[derive(Default)]
struct HistoryCache {
    entries: HashMap<String, CachedHistory>,
    bytes: usize,
    clock: u64,
}

struct CachedHistory {
    history: ModelHistory,
    used: u64,
}

impl HistoryCache {
    fn get(&mut self, id: &str) -> Option<ModelHistory> {
        self.clock += 1;
        let entry = self.entries.get_mut(id)?;
        entry.used = self.clock;
        Some(entry.history.clone())
    }

    fn put(&mut self, id: &str, history: ModelHistory) {
        self.remove(id);
        if history.json().len() > CACHE_BYTES / 4 {
            // A very long session is read from the file each turn rather than crowd out the rest.
            return;
        }
        self.clock += 1;
        self.bytes += history.json().len();
        self.entries.insert(id.to_string(), CachedHistory { history, used: self.clock });
        self.evict();
    }

    /// A committed turn: its messages' model texts join the session's cached history, if any.
    fn extend<'t>(&mut self, id: &str, texts: impl Iterator<Item = (&'t str, bool)>) {
        let Some(entry) = self.entries.get_mut(id) else { return };
        let before = entry.history.json().len();
        for (text, starts_turn) in texts {
            entry.history.push_text(text, starts_turn);
        }
        let after = entry.history.json().len();
        self.bytes += after - before;
        if after > CACHE_BYTES / 4 {
            self.remove(id);
        }
        self.evict();
    }

    fn remove(&mut self, id: &str) {
        if let Some(entry) = self.entries.remove(id) {
            self.bytes -= entry.history.json().len();
        }
    }

    fn evict(&mut self) {
        while self.bytes > CACHE_BYTES || self.entries.len() > CACHE_SESSIONS {
            let Some(oldest) = self.entries.iter().min_by_key(|(_, e)| e.used).map(|(id, _)| id.clone()) else { return };
            self.remove(&oldest);
        }
    }
}

impl SqliteStore {
    /// Opens (creating the folder, the file and the schema when missing) the session database.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| backend(format!("cannot create the folder {}: {e}", parent.display())))?;
        }
        let conn = Connection::open(path).map_err(|e| backend(format!("cannot open {}: {e}", path.display())))?;
        Self::prepare(&conn).map_err(|e| match e {
            StoreError::Backend { store, message } => {
                StoreError::Backend { store, message: format!("{}: {message}", path.display()) }
            }
            other => other,
        })?;
        Ok(SqliteStore {
            conn: Arc::new(parking_lot::Mutex::new(conn)),
            cache: Arc::new(parking_lot::Mutex::new(HistoryCache::default())),
            locks: LocalLocks::default(),
        })
    }

    fn prepare(conn: &Connection) -> Result<(), StoreError> {
        // Another process with the file open (a second gateway on the same data folder) makes
        // writers wait briefly instead of failing at once.
        conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(db_err)?;
        let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)).map_err(db_err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(backend(format!("the file system does not allow WAL mode (journal_mode is {mode})")));
        }
        // Durable against a killed process; see the module's comment for why not FULL.
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(db_err)?;
        conn.pragma_update(None, "foreign_keys", "ON").map_err(db_err)?;
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(db_err)?;
        if version > SCHEMA_VERSION {
            return Err(backend(format!(
                "the file was written by a newer gateway (schema version {version}, this one knows {SCHEMA_VERSION})"
            )));
        }
        conn.execute_batch(SCHEMA).map_err(db_err)?;
        if version < SCHEMA_VERSION {
            conn.pragma_update(None, "user_version", SCHEMA_VERSION).map_err(db_err)?;
        }
        Ok(())
    }

    /// Runs `f` with the connection on the blocking pool. A call already running is not
    /// cancelled when its future is dropped: a transaction either commits whole or not at all.
    async fn with_conn<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection, &parking_lot::Mutex<HistoryCache>) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (conn, cache) = (self.conn.clone(), self.cache.clone());
        tokio::task::spawn_blocking(move || f(&mut conn.lock(), &cache))
            .await
            .map_err(|e| backend(format!("the database task failed: {e}")))?
    }
}

/// A session's summary and its messages' JSON texts, oldest first.
fn read_session(conn: &mut Connection, id: &str) -> Result<Option<(SessionSummary, Vec<String>)>, StoreError> {
    let tx = conn.transaction().map_err(db_err)?;
    let summary = tx
        .prepare_cached("SELECT title, created_at, updated_at, turns FROM sessions WHERE id = ?1")
        .and_then(|mut s| s.query_row(params![id], |r| summary_row(id.to_string(), r, 0)).optional())
        .map_err(db_err)?;
    let Some(summary) = summary else { return Ok(None) };
    let mut stmt = tx.prepare_cached("SELECT json FROM messages WHERE session_id = ?1 ORDER BY seq").map_err(db_err)?;
    let texts: Vec<String> = stmt
        .query_map(params![id], |r| r.get::<_, String>(0))
        .map_err(db_err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(db_err)?;
    drop(stmt);
    tx.finish().map_err(db_err)?;
    Ok(Some((summary, texts)))
}

fn summary_row(id: String, r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<SessionSummary> {
    Ok(SessionSummary {
        id,
        title: r.get(first)?,
        created_at: r.get(first + 1)?,
        updated_at: r.get(first + 2)?,
        turns: r.get::<_, i64>(first + 3)?.max(0) as u64,
    })
}

impl SessionStore for SqliteStore {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Session>, StoreError>> {
        let id = id.to_string();
        self.with_conn(move |conn, _| {
            let Some((summary, texts)) = read_session(conn, &id)? else { return Ok(None) };
            let messages = super::store::parse_messages(&id, &texts)?;
            Ok(Some(Session { summary, messages }))
        })
        .boxed()
    }

    fn model_history<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<ModelHistory, StoreError>> {
        if let Some(history) = self.cache.lock().get(id) {
            return futures::future::ready(Ok(history)).boxed();
        }
        let id = id.to_string();
        self.with_conn(move |conn, cache| {
            let mut history = ModelHistory::default();
            if let Some((_, texts)) = read_session(conn, &id)? {
                for message in super::store::parse_messages(&id, &texts)? {
                    history.push(&message);
                }
            }
            // Still under the connection's lock: nothing has changed the session meanwhile.
            cache.lock().put(&id, history.clone());
            Ok(history)
        })
        .boxed()
    }

    fn append_turn<'a>(&'a self, id: &'a str, title: &'a str, messages: &'a [Value]) -> BoxFuture<'a, Result<(), StoreError>> {
        let id = id.to_string();
        let title = title.to_string();
        let texts: Vec<String> = messages.iter().map(Value::to_string).collect();
        // What the model reads of them: the same text unless a page's part has to go.
        let model_texts: Vec<Option<String>> =
            messages.iter().map(|m| m.get(UI_KEY).is_some().then(|| model_text(m))).collect();
        let turn_starts: Vec<bool> = messages.iter().map(starts_turn).collect();
        let turns = i64::from(messages.iter().any(|m| !is_page_only(m)));
        self.with_conn(move |conn, cache| {
            let now = now_ms();
            // IMMEDIATE: take the write lock up front, so the turn commits whole or waits.
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db_err)?;
            tx.prepare_cached(
                "INSERT INTO sessions (id, title, created_at, updated_at, turns) VALUES (?1, '', ?2, ?2, 0)
                 ON CONFLICT (id) DO NOTHING",
            )
            .and_then(|mut s| s.execute(params![id, now]))
            .map_err(db_err)?;
            let next: i64 = tx
                .prepare_cached("SELECT COALESCE(MAX(seq) + 1, 0) FROM messages WHERE session_id = ?1")
                .and_then(|mut s| s.query_row(params![id], |r| r.get(0)))
                .map_err(db_err)?;
            {
                let mut insert =
                    tx.prepare_cached("INSERT INTO messages (session_id, seq, json) VALUES (?1, ?2, ?3)").map_err(db_err)?;
                for (i, text) in texts.iter().enumerate() {
                    insert.execute(params![id, next + i as i64, text]).map_err(db_err)?;
                }
            }
            tx.prepare_cached(
                "UPDATE sessions SET
                     title = CASE WHEN title = '' THEN ?2 ELSE title END,
                     updated_at = MAX(updated_at, ?3),
                     turns = turns + ?4
                 WHERE id = ?1",
            )
            .and_then(|mut s| s.execute(params![id, title, now, turns]))
            .map_err(db_err)?;
            tx.commit().map_err(db_err)?;
            let model_texts = texts.iter().zip(&model_texts).map(|(t, m)| m.as_deref().unwrap_or(t));
            cache.lock().extend(&id, model_texts.zip(turn_starts.iter().copied()));
            Ok(())
        })
        .boxed()
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<SessionSummary>, StoreError>> {
        self.with_conn(|conn, _| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id, title, created_at, updated_at, turns FROM sessions ORDER BY updated_at DESC, id ASC",
                )
                .map_err(db_err)?;
            let rows = stmt.query_map([], |r| summary_row(r.get(0)?, r, 1)).map_err(db_err)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(db_err)
        })
        .boxed()
    }

    fn rename<'a>(&'a self, id: &'a str, title: &'a str) -> BoxFuture<'a, Result<Option<SessionSummary>, StoreError>> {
        let (id, title) = (id.to_string(), title.to_string());
        self.with_conn(move |conn, _| {
            conn.prepare_cached("UPDATE sessions SET title = ?2 WHERE id = ?1")
                .and_then(|mut s| s.execute(params![id, title]))
                .map_err(db_err)?;
            conn.prepare_cached("SELECT title, created_at, updated_at, turns FROM sessions WHERE id = ?1")
                .and_then(|mut s| s.query_row(params![id], |r| summary_row(id.clone(), r, 0)).optional())
                .map_err(db_err)
        })
        .boxed()
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        let id = id.to_string();
        self.with_conn(move |conn, cache| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db_err)?;
            tx.execute("DELETE FROM messages WHERE session_id = ?1", params![id]).map_err(db_err)?;
            let removed = tx.execute("DELETE FROM sessions WHERE id = ?1", params![id]).map_err(db_err)?;
            tx.commit().map_err(db_err)?;
            cache.lock().remove(&id);
            Ok(removed > 0)
        })
        .boxed()
    }

    fn lock<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<TurnLock, StoreError>> {
        async move { Ok(TurnLock::new(self.locks.lock(id).await)) }.boxed()
    }
}

/// Per-session turn locks inside one process: a fair (FIFO) async mutex per session id, kept in
/// a map only while some turn holds or waits for it. Turns of one session wait for each other;
/// different sessions never block each other. The Redis store takes one of these first too, so
/// only one waiter per replica polls Redis for a session.
#[derive(Clone, Default)]
pub(crate) struct LocalLocks {
    map: Arc<parking_lot::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

impl LocalLocks {
    /// Waits for the session's lock. Cancel-safe: a waiter dropped before it gets the lock
    /// leaves nothing behind for long (entries nobody holds are swept on the next call).
    pub(crate) async fn lock(&self, id: &str) -> LocalGuard {
        let mutex = {
            let mut map = self.map.lock();
            // Only the map refers to these: no turn holds or waits for them.
            map.retain(|_, m| Arc::strong_count(m) > 1);
            map.entry(id.to_string()).or_default().clone()
        };
        let guard = mutex.lock_owned().await;
        LocalGuard { guard: Some(guard), locks: self.clone(), id: id.to_string() }
    }

    #[cfg(test)]
    pub(crate) fn entries(&self) -> usize {
        self.map.lock().len()
    }
}

/// Holds one session's in-process lock; dropping it lets the next waiting turn run.
pub(crate) struct LocalGuard {
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
    locks: LocalLocks,
    id: String,
}

impl Drop for LocalGuard {
    fn drop(&mut self) {
        drop(self.guard.take());
        // The count is read under the map's lock, where every new waiter takes its reference:
        // 1 means nobody else holds or waits for this session.
        let mut map = self.locks.map.lock();
        if map.get(&self.id).is_some_and(|m| Arc::strong_count(m) == 1) {
            map.remove(&self.id);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    /// The behaviour every store shares: two turns, reload, titles, list order, delete.
    /// `a` and `b` are session ids not used before in this store.
    pub(crate) async fn exercise_crud(store: &dyn SessionStore, a: &str, b: &str) {
        assert!(store.load(a).await.unwrap().is_none());
        let turn1 = vec![
            json!({"role": "user", "content": "How much milk is left?"}),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "grocery__get_low_stock", "arguments": "{}"}}]}),
            json!({"role": "tool", "tool_call_id": "c1", "content": "milk: 1"}),
            json!({"role": "assistant", "content": "One bottle of milk. ✓"}),
        ];
        store.append_turn(a, "How much milk is left?", &turn1).await.unwrap();
        let turn2 = vec![json!({"role": "user", "content": "Thanks"}), json!({"role": "assistant", "content": "You're welcome"})];
        tokio::time::sleep(Duration::from_millis(5)).await;
        store.append_turn(a, "Thanks", &turn2).await.unwrap();

        let s = store.load(a).await.unwrap().expect("session a");
        assert_eq!(s.summary.id, a);
        assert_eq!(s.summary.title, "How much milk is left?", "the first turn's title stays");
        assert_eq!(s.summary.turns, 2);
        assert!(s.summary.updated_at > s.summary.created_at);
        let all: Vec<Value> = turn1.iter().chain(turn2.iter()).cloned().collect();
        assert_eq!(s.messages, all);
        assert_eq!(store.model_history(a).await.unwrap(), ModelHistory::of(&all));

        // A session whose first turn has no title takes the next one's.
        tokio::time::sleep(Duration::from_millis(5)).await;
        store.append_turn(b, "", &[json!({"role": "user", "content": ""})]).await.unwrap();
        assert_eq!(store.load(b).await.unwrap().unwrap().summary.title, "");
        store.append_turn(b, "Second", &[json!({"role": "user", "content": "Second"})]).await.unwrap();
        assert_eq!(store.load(b).await.unwrap().unwrap().summary.title, "Second");

        // Most recently updated first; touching a moves it back to the front.
        let ids = |l: Vec<SessionSummary>| l.into_iter().map(|s| s.id).filter(|i| i == a || i == b).collect::<Vec<_>>();
        assert_eq!(ids(store.list().await.unwrap()), vec![b.to_string(), a.to_string()]);
        tokio::time::sleep(Duration::from_millis(5)).await;
        store.append_turn(a, "x", &[json!({"role": "user", "content": "again"})]).await.unwrap();
        let list = store.list().await.unwrap();
        assert_eq!(ids(list.clone()), vec![a.to_string(), b.to_string()]);
        let sa = list.iter().find(|s| s.id == a).unwrap();
        assert_eq!((sa.turns, sa.title.as_str()), (3, "How much milk is left?"));
        assert_eq!(store.load(a).await.unwrap().unwrap().messages.len(), 7);

        // A page-only note (an app the user opened) is kept in order, is no turn, and is not
        // the model's; a user's title replaces the first message's.
        let note = json!({"ui": {"opened": {"appId": "grocery", "resourceUri": "ui://grocery/a.html"}}});
        let before = store.model_history(a).await.unwrap();
        store.append_turn(a, "", std::slice::from_ref(&note)).await.unwrap();
        let s = store.load(a).await.unwrap().unwrap();
        assert_eq!((s.summary.turns, s.messages.last()), (3, Some(&note)));
        assert_eq!(store.model_history(a).await.unwrap(), before);
        let renamed = store.rename(a, "Milk").await.unwrap().expect("renamed");
        assert_eq!((renamed.title.as_str(), renamed.turns), ("Milk", 3));
        assert_eq!(store.load(a).await.unwrap().unwrap().summary.title, "Milk");
        assert_eq!(store.rename("no-such-session", "x").await.unwrap(), None);
        assert!(store.load("no-such-session").await.unwrap().is_none(), "renaming creates nothing");

        assert!(store.delete(a).await.unwrap());
        assert!(!store.delete(a).await.unwrap(), "deleting twice");
        assert!(store.load(a).await.unwrap().is_none());
        assert!(store.model_history(a).await.unwrap().is_empty(), "a deleted session has no history");
        assert_eq!(ids(store.list().await.unwrap()), vec![b.to_string()]);
        // A deleted session starts afresh.
        store.append_turn(a, "new", &[json!({"role": "user", "content": "new"})]).await.unwrap();
        let s = store.load(a).await.unwrap().unwrap();
        assert_eq!((s.summary.turns, s.summary.title.as_str(), s.messages.len()), (1, "new", 1));
        assert_eq!(store.model_history(a).await.unwrap(), ModelHistory::of(&s.messages));
        assert!(store.delete(a).await.unwrap());
        assert!(store.delete(b).await.unwrap());
    }

    /// Turns of one session run one after another (the second waits, it is not rejected); turns
    /// of two sessions overlap. `one`, `two` are two handles on the same sessions (two
    /// replicas for Redis, or the same store twice).
    pub(crate) async fn exercise_locks(one: Arc<dyn SessionStore>, two: Arc<dyn SessionStore>, a: &str, b: &str) {
        let hold = Duration::from_millis(300);
        // Same session: the critical sections must not overlap.
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let started = std::time::Instant::now();
        let tasks: Vec<_> = [one.clone(), two.clone(), one.clone()]
            .into_iter()
            .map(|store| {
                let (inside, most, id) = (inside.clone(), most.clone(), a.to_string());
                tokio::spawn(async move {
                    let _turn = store.lock(&id).await.unwrap();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(hold).await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(most.load(Ordering::SeqCst), 1, "two turns of one session ran at once");
        assert!(started.elapsed() >= hold * 3, "the turns waited for each other");

        // Two sessions: both hold their locks at once.
        let both = Arc::new(tokio::sync::Barrier::new(2));
        let tasks: Vec<_> = [(one.clone(), a.to_string()), (two.clone(), b.to_string())]
            .into_iter()
            .map(|(store, id)| {
                let both = both.clone();
                tokio::spawn(async move {
                    let _turn = store.lock(&id).await.unwrap();
                    both.wait().await;
                })
            })
            .collect();
        // The barrier opens only while both hold their locks; the bound turns a block into a failure.
        for t in tasks {
            tokio::time::timeout(Duration::from_secs(30), t).await.expect("two sessions blocked each other").unwrap();
        }

        // A waiter that gives up (the client went away) does not keep the session locked.
        let held = one.lock(a).await.unwrap();
        assert!(tokio::time::timeout(Duration::from_millis(100), two.lock(a)).await.is_err());
        drop(held);
        let again = tokio::time::timeout(Duration::from_secs(5), two.lock(a)).await.expect("lock after the holder left");
        drop(again.unwrap());
    }

    fn open_in(dir: &tempfile::TempDir) -> SqliteStore {
        SqliteStore::open(&dir.path().join("nested/data/sessions.db")).unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_turns_list_titles_delete() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_in(&dir);
        assert_eq!(store.kind(), "sqlite");
        assert!(dir.path().join("nested/data/sessions.db").exists(), "the folder and the file are created");
        assert!(store.list().await.unwrap().is_empty());
        exercise_crud(&store, "apps-a", "apps-b").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_pragmas_and_reopen_keep_everything() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/data/sessions.db");
        {
            let store = open_in(&dir);
            {
                let conn = store.conn.lock();
                let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
                assert_eq!(mode, "wal");
                let sync: i64 = conn.query_row("PRAGMA synchronous", [], |r| r.get(0)).unwrap();
                assert_eq!(sync, 1, "synchronous=NORMAL");
            }
            store.append_turn("s1", "first", &[json!({"role": "user", "content": "first"})]).await.unwrap();
            store.append_turn("s1", "second", &[json!({"role": "assistant", "content": "second"})]).await.unwrap();
            store.append_turn("s2", "other", &[json!({"role": "user", "content": "other"})]).await.unwrap();
            // As after a crash: the connection is never closed, so the WAL is not checkpointed
            // into the main file; the next open must find everything in it.
            std::mem::forget(store);
        }
        assert!(dir.path().join("nested/data/sessions.db-wal").exists());
        let store = SqliteStore::open(&path).unwrap();
        let s = store.load("s1").await.unwrap().unwrap();
        assert_eq!(s.summary.turns, 2);
        assert_eq!(s.summary.title, "first");
        assert_eq!(s.messages, vec![json!({"role": "user", "content": "first"}), json!({"role": "assistant", "content": "second"})]);
        assert_eq!(store.list().await.unwrap().len(), 2);
        drop(store);

        // The file as another reader sees it (the WAL included) passes the integrity check.
        let conn = Connection::open(&path).unwrap();
        let ok: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(ok, "ok");
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, SCHEMA_VERSION);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_model_history_follows_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/data/sessions.db");
        let store = open_in(&dir);
        // A new session: empty, and cached as such; its turns are appended to the cached copy.
        assert!(store.model_history("s").await.unwrap().is_empty());
        let ui = json!({"role": "tool", "tool_call_id": "c1", "content": "shown", UI_KEY: {"resourceUri": "ui://a/b"}});
        let turn1 = vec![json!({"role": "user", "content": "show it"}), ui.clone(), json!({"role": "assistant", "content": "ok"})];
        store.append_turn("s", "show it", &turn1).await.unwrap();
        let history = store.model_history("s").await.unwrap();
        assert_eq!(history, ModelHistory::of(&turn1));
        assert_eq!(history.len(), 3);
        assert!(!history.json().contains("resourceUri"), "the page's part is not for the model: {}", history.json());
        let parsed: Value = serde_json::from_str(&format!("[{}]", history.json())).unwrap();
        assert_eq!(parsed[1], json!({"role": "tool", "tool_call_id": "c1", "content": "shown"}));
        // A copy someone still holds does not change when the session grows.
        let turn2 = vec![json!({"role": "user", "content": "again"})];
        store.append_turn("s", "again", &turn2).await.unwrap();
        assert_eq!(history.len(), 3);
        let all: Vec<Value> = turn1.iter().chain(turn2.iter()).cloned().collect();
        assert_eq!(store.model_history("s").await.unwrap(), ModelHistory::of(&all));
        // A session not cached yet (another store on the file stands for a restart) is read from the file.
        drop(store);
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.cache.lock().entries.len(), 0);
        assert_eq!(store.model_history("s").await.unwrap(), ModelHistory::of(&all));
        assert_eq!(store.cache.lock().entries.len(), 1);
        assert!(store.delete("s").await.unwrap());
        assert_eq!(store.cache.lock().entries.len(), 0);
        assert!(store.model_history("s").await.unwrap().is_empty());
    }

    #[test]
    fn history_cache_stays_within_its_bounds() {
        let mut cache = HistoryCache::default();
        let mut big = ModelHistory::default();
        big.push_text(&"x".repeat(CACHE_BYTES / 4 + 1), true);
        cache.put("big", big);
        assert!(cache.get("big").is_none(), "a history over a quarter of the budget is not kept");
        let mut quarter = ModelHistory::default();
        quarter.push_text(&"y".repeat(CACHE_BYTES / 4 - 10), true);
        for id in ["a", "b", "c", "d"] {
            cache.put(id, quarter.clone());
        }
        assert!(cache.get("a").is_some());
        // Over the budget: the least recently used ("b") goes.
        cache.put("e", quarter.clone());
        assert!(cache.bytes <= CACHE_BYTES);
        assert!(cache.get("b").is_none());
        assert!(cache.get("a").is_some() && cache.get("e").is_some());
        // Growing past a quarter drops the entry.
        cache.extend("a", [("z".repeat(20).as_str(), true)].into_iter());
        assert!(cache.get("a").is_none());
        assert_eq!(cache.bytes, cache.entries.values().map(|e| e.history.json().len()).sum::<usize>());
        for i in 0..CACHE_SESSIONS + 10 {
            cache.put(&format!("s{i}"), ModelHistory::default());
        }
        assert_eq!(cache.entries.len(), CACHE_SESSIONS);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_refuses_a_newer_schema_and_a_bad_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        Connection::open(&path).unwrap().pragma_update(None, "user_version", 99).unwrap();
        let err = SqliteStore::open(&path).err().expect("newer schema refused").to_string();
        assert!(err.contains("newer gateway") && err.contains("sessions.db"), "{err}");

        std::fs::write(dir.path().join("file"), "").unwrap();
        let err = SqliteStore::open(&dir.path().join("file/sessions.db")).err().expect("parent is a file").to_string();
        assert!(err.contains("cannot create the folder"), "{err}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_corrupt_message_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_in(&dir);
        store.append_turn("s", "t", &[json!({"role": "user", "content": "hi"})]).await.unwrap();
        store.conn.lock().execute("UPDATE messages SET json = '{not json' WHERE session_id = 's'", []).unwrap();
        assert!(matches!(store.load("s").await, Err(StoreError::Corrupt(_))));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_locks_serialise_one_session_only() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn SessionStore> = Arc::new(open_in(&dir));
        exercise_locks(store.clone(), store.clone(), "s-a", "s-b").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn local_locks_are_fifo_and_cleaned_up() {
        let locks = LocalLocks::default();
        let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let first = locks.lock("s").await;
        let mut tasks = Vec::new();
        for i in 0..5 {
            let (locks, order) = (locks.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _g = locks.lock("s").await;
                order.lock().push(i);
            }));
            // Let each waiter queue before the next.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(locks.entries(), 1);
        drop(first);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock(), vec![0, 1, 2, 3, 4], "waiters run in arrival order");
        assert_eq!(locks.entries(), 0, "no entry left once nobody holds or waits");

        // A cancelled waiter's entry goes on the next call.
        let held = locks.lock("x").await;
        assert!(tokio::time::timeout(Duration::from_millis(20), locks.lock("x")).await.is_err());
        drop(held);
        let _other = locks.lock("y").await;
        assert_eq!(locks.entries(), 1);
    }
}
