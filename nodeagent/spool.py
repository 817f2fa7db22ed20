"""Local SQLite spool: every sample is stored here before it is sent, and leaves only once accepted.

Rejected samples are moved to a dead-letter JSON-lines file beside the spool with their reason.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from nodeagent.samples import UsageSample

_SCHEMA = """
CREATE TABLE IF NOT EXISTS samples (
    seq  INTEGER PRIMARY KEY AUTOINCREMENT,
    id   TEXT NOT NULL UNIQUE,
    body TEXT NOT NULL
)
"""


class Spool:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.dead_letter_path = self.path.with_name(self.path.name + ".deadletter.jsonl")
        self._lock = threading.Lock()
        # isolation_level=None: explicit transactions below; WAL keeps the file consistent if the
        # process dies mid-write, synchronous=FULL makes each committed batch survive a power cut.
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.execute(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def add(self, samples: Iterable[UsageSample]) -> int:
        """Store samples; one already stored (same id) is kept once. Returns how many were new."""
        rows = [(s.id, json.dumps(s.to_json(), separators=(",", ":"))) for s in samples]
        with self._lock:
            before = self._db.total_changes
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT OR IGNORE INTO samples (id, body) VALUES (?, ?)", rows)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            return self._db.total_changes - before

    def pending(self, limit: int) -> list[dict]:
        """The oldest stored samples, at most `limit`."""
        with self._lock:
            rows = self._db.execute("SELECT body FROM samples ORDER BY seq LIMIT ?", (limit,)).fetchall()
        return [json.loads(body) for (body,) in rows]

    def count(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM samples").fetchone()[0]

    def remove(self, ids: Iterable[str]) -> int:
        ids = list(ids)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                removed = 0
                for start in range(0, len(ids), 500):  # stay under SQLite's bound-variable limit
                    chunk = ids[start:start + 500]
                    marks = ",".join("?" * len(chunk))
                    removed += self._db.execute(f"DELETE FROM samples WHERE id IN ({marks})", chunk).rowcount
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            return removed

    def dead_letter(self, rejected: dict[str, str], samples_by_id: dict[str, dict]) -> None:
        """Move rejected samples out of the spool into the dead-letter file, with their reason."""
        if not rejected:
            return
        now = datetime.now(UTC).isoformat(timespec="seconds")
        lines = [
            json.dumps({"id": sid, "reason": reason, "rejected_at": now, "sample": samples_by_id.get(sid)})
            for sid, reason in rejected.items()
        ]
        # Written (and flushed to disk) before the delete: a crash in between can at worst repeat a
        # line in the dead-letter file; it never loses a rejected sample.
        with open(self.dead_letter_path, "a", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")
            out.flush()
            os.fsync(out.fileno())
        self.remove(rejected)
