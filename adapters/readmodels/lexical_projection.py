"""The lexical projection (docs/search.md): full-text documents of every version's key, value and
evidence text, next to the log (the same SQLite file, or the same PostgreSQL schema).

    pmem_tracking      (name='lexical', position, version)   the event index the rows reflect
    pmem_lex_versions  (version_id, cell, vid, namespace, key)   one row per version ever created, numbered
                                                               in creation order (as the vector projection)
    pmem_lex_terms     (term, df)                              documents holding each word ('': all documents;
                                                               '\x1f' + namespace: the namespace's)
    SQLite:     pmem_lex_fts, an FTS5 table: keywords, value, evidence, ns (indexed; ``ns``: one token
                naming the namespace), version_id, cell, vid, event_index, namespace (stored only);
                ranked by BM25
    PostgreSQL: pmem_lex_docs, the same columns with one weighted ``tsvector`` (keywords A, value B,
                evidence C) under a GIN index; ranked by the BM25 idf of the terms it holds plus ``ts_rank``

Same pattern as the other projections (:mod:`.tracked_projection`): each batch's rows and the position
commit in one transaction; :meth:`LexicalProjection.rebuild` drops the tables and replays the log. The
rows say nothing about which versions are open: a search takes the versions open at its event index
from the vector projection, whose numbering of versions this one shares.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pmem.adapters.readmodels.tracked_projection import TRACKING, TrackedProjection
from pmem.adapters.storage.projection_db import ProjectionDb, SqliteDb
from pmem.projections.lexical import NAME, SCHEMA_VERSION, Doc, LexicalProjector, chosen_terms, idf, query_terms
from pmem.projections.replay import IndexedEvent

BATCH_SIZE = 10_000
VERSIONS, TERMS, FTS, DOCS = "pmem_lex_versions", "pmem_lex_terms", "pmem_lex_fts", "pmem_lex_docs"
FIELD_WEIGHTS = (2.0, 1.0, 1.0, 0.0)  # BM25 weights of keywords, value, evidence, ns (SQLite)
NS_TERM = "\x1f"  # before a namespace in the terms table: its documents (no word holds this character)
# A search ranks only its namespace's documents when these are under this share of all: filtering costs
# a store of one namespace up to twice the time, and saves a tenant among many nearly all of it.
NS_FILTER_SHARE = 0.5
Match = tuple[int, str, int, str, int, float]  # version_id, cell, vid, namespace, event_index, score (higher: better)


class LexicalProjection(TrackedProjection):
    """Maintains the lexical tables from the log (``log``: an EventLog or the lazy log of a SQLite file)."""

    name = NAME
    version = SCHEMA_VERSION

    def __init__(self, conn: ProjectionDb | sqlite3.Connection, log: Any, *, batch_size: int = BATCH_SIZE) -> None:
        super().__init__(conn, log, LexicalProjector(), batch_size=batch_size)
        self.ns_filter_share = NS_FILTER_SHARE  # below this share of all documents, a namespace is filtered first

    @property
    def fts5(self) -> bool:
        """SQLite (FTS5) rather than PostgreSQL (``tsvector``)."""
        return isinstance(self.conn, SqliteDb)

    def create_tables(self) -> None:
        if self._has_tables() and self.stored_version() in (None, self.version):
            return
        with self._transaction():
            if self._has_tables() and self.stored_version() not in (None, self.version):
                self._drop()
            self._create()

    def _has_tables(self) -> bool:
        return {VERSIONS, TERMS, FTS if self.fts5 else DOCS, TRACKING} <= self.conn.names()

    def _create(self) -> None:
        self._create_tracking()
        i = self.conn.int_type
        self.conn.execute(f"CREATE TABLE IF NOT EXISTS {VERSIONS} (version_id {i} PRIMARY KEY, cell TEXT NOT NULL, "
                          f"vid {i} NOT NULL, namespace TEXT NOT NULL, key TEXT NOT NULL, UNIQUE (cell, vid))")
        self.conn.execute(f"CREATE TABLE IF NOT EXISTS {TERMS} (term TEXT PRIMARY KEY, df {i} NOT NULL)")
        if self.fts5:
            self.conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS} USING fts5(keywords, value, evidence, "
                              "ns, version_id UNINDEXED, cell UNINDEXED, vid UNINDEXED, event_index UNINDEXED, "
                              "namespace UNINDEXED, tokenize='unicode61 remove_diacritics 0')")
        else:
            self.conn.execute(f"CREATE TABLE IF NOT EXISTS {DOCS} (version_id {i} NOT NULL, cell TEXT NOT NULL, "
                              f"vid {i} NOT NULL, event_index {i} NOT NULL, namespace TEXT NOT NULL, "
                              "doc tsvector NOT NULL)")
            self.conn.execute(f"CREATE INDEX IF NOT EXISTS pmem_lex_docs_doc ON {DOCS} USING GIN (doc)")

    def _drop(self) -> None:
        self._forget_position()
        for table in (VERSIONS, TERMS, FTS if self.fts5 else DOCS):
            self.conn.execute(f"DROP TABLE IF EXISTS {table}")

    # -- catching up -------------------------------------------------------------
    def _seed_batch(self, events: Sequence[IndexedEvent], start: int) -> None:
        row = self.conn.execute(f"SELECT COALESCE(MAX(version_id) + 1, 0) FROM {VERSIONS}").fetchone()
        self.projector.next_id = int(row[0])

    def _write_rows(self, rows: Any) -> None:
        versions, docs = rows
        self.conn.executemany(f"INSERT INTO {VERSIONS} VALUES (?, ?, ?, ?, ?)", versions)
        ids = {(cell, vid): vid_id for vid_id, cell, vid, _, _ in versions}
        ids.update(self._version_ids({(d.cell, d.vid) for d in docs} - ids.keys()))
        self.conn.executemany(self._insert_doc(), [(*_doc_row(ids[(d.cell, d.vid)], d), *(
            (ns_token(d.namespace),) if self.fts5 else ())) for d in docs])
        df = Counter(t for d in docs for t in d.terms())
        df[""] = len(docs)
        df.update(NS_TERM + d.namespace for d in docs)
        self.conn.executemany(f"INSERT INTO {TERMS} VALUES (?, ?) ON CONFLICT (term) DO UPDATE SET "
                              f"df = {TERMS}.df + excluded.df", sorted(df.items()))

    def _insert_doc(self) -> str:
        if self.fts5:
            return (f"INSERT INTO {FTS} (version_id, cell, vid, event_index, namespace, keywords, value, evidence, "
                    "ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
        return (f"INSERT INTO {DOCS} VALUES (?, ?, ?, ?, ?, setweight(to_tsvector('simple', ?), 'A') || "
                "setweight(to_tsvector('simple', ?), 'B') || setweight(to_tsvector('simple', ?), 'C'))")

    def _forget_cells(self, cells: list[str]) -> None:
        """Delete the documents of forgotten cells and take their words out of the document
        frequencies; on SQLite, FTS5 then merges its segments (``optimize``), so the deleted
        documents' tokens are gone from the index too, not only marked deleted."""
        table, columns = ((FTS, "namespace, keywords, value, evidence") if self.fts5
                          else (DOCS, "namespace, tsvector_to_array(doc)"))
        marks = ",".join("?" * len(cells))
        rows = self.conn.execute(f"SELECT {columns} FROM {table} WHERE cell IN ({marks})", cells).fetchall()
        if not rows:
            return
        df: Counter[str] = Counter()
        for row in rows:
            df.update(set(" ".join(row[1:]).split()) if self.fts5 else set(row[1]))
        df[""] = len(rows)
        df.update(NS_TERM + row[0] for row in rows)
        self.conn.executemany(f"UPDATE {TERMS} SET df = df - ? WHERE term = ?", [(n, t) for t, n in df.items()])
        self.conn.execute(f"DELETE FROM {TERMS} WHERE df <= 0 AND term <> ''")
        self.conn.execute(f"DELETE FROM {table} WHERE cell IN ({marks})", cells)
        if self.fts5:
            self.conn.execute(f"INSERT INTO {FTS} ({FTS}) VALUES ('optimize')")

    def _version_ids(self, pairs: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        for cell, vid in pairs:
            row = self.conn.execute(f"SELECT version_id FROM {VERSIONS} WHERE cell=? AND vid=?", (cell, vid)).fetchone()
            out[(cell, vid)] = int(row[0])
        return out

    # -- reading -----------------------------------------------------------------
    def terms(self, query: str) -> tuple[list[str], dict[str, float]]:
        """The terms of ``query`` the index is asked for (:func:`pmem.projections.lexical.chosen_terms`), and
        each one's idf."""
        wanted = query_terms(query)
        marks = ",".join("?" * (len(wanted) + 1))
        df = {t: int(d) for t, d in self.conn.execute(f"SELECT term, df FROM {TERMS} WHERE term IN ({marks})",
                                                      ["", *wanted]).fetchall()}
        total = df.pop("", 0)
        chosen = chosen_terms(wanted, df, total)
        return chosen, {t: idf(df[t], total) for t in chosen}

    def _few_of_all(self, namespace: str) -> bool:
        """Whether ``namespace`` holds under :attr:`ns_filter_share` of all documents."""
        df = dict(self.conn.execute(f"SELECT term, df FROM {TERMS} WHERE term IN (?, ?)",
                                    ("", NS_TERM + namespace)).fetchall())
        return int(df.get(NS_TERM + namespace, 0)) < self.ns_filter_share * int(df.get("", 0))

    def matches(self, terms: dict[str, float], namespace: str, upto: int, limit: int) -> list[Match]:
        """The ``limit`` documents that hold any of ``terms`` (term -> idf) best, best first: by BM25 on
        SQLite, by the idf of the terms each holds plus ``ts_rank`` on PostgreSQL. Each comes with its
        namespace and event index. SQLite ranks the documents of every index, and of ``namespace`` alone
        when it holds few of them (by its indexed ``ns`` word: one tenant's search then costs what its
        own documents cost), else of every namespace (reading the stored columns of every match would
        cost more than ranking them); PostgreSQL ranks only those of ``namespace`` up to ``upto``; the
        caller keeps the ones it may use."""
        if not terms:
            return []
        if self.fts5:
            match = " OR ".join(f'"{t}"' for t in terms)
            if self._few_of_all(namespace):
                match = f'ns : "{ns_token(namespace)}" AND ({match})'
            rows = self.conn.execute(
                f"SELECT f.version_id, f.cell, f.vid, f.namespace, f.event_index, -m.r FROM (SELECT rowid AS id, "
                f"bm25({FTS}, ?, ?, ?, ?) AS r FROM {FTS} WHERE {FTS} MATCH ? ORDER BY r LIMIT ?) AS m "
                f"JOIN {FTS} AS f ON f.rowid = m.id ORDER BY m.r",
                (*FIELD_WEIGHTS, match, limit)).fetchall()
        else:
            held = " + ".join("CASE WHEN doc @@ plainto_tsquery('simple', ?) THEN ? ELSE 0 END" for _ in terms)
            rows = self.conn.execute(
                f"SELECT version_id, cell, vid, namespace, event_index, {held} + ts_rank(doc, q) AS r FROM {DOCS}, "
                "to_tsquery('simple', ?) AS q WHERE doc @@ q AND namespace = ? AND event_index <= ? "
                "ORDER BY r DESC LIMIT ?",
                (*[x for t, w in terms.items() for x in (t, w)], " | ".join(f"'{t}'" for t in terms),
                 namespace, upto, limit)).fetchall()
        return [(int(v), str(c), int(vid), str(ns), int(i), float(r)) for v, c, vid, ns, i, r in rows]


def ns_token(namespace: str) -> str:
    """The one word the ``ns`` column holds for ``namespace`` (any namespace, punctuation included,
    becomes a single token FTS5 cannot confuse with another's)."""
    return "n" + hashlib.blake2b(namespace.encode(), digest_size=12).hexdigest()


def _doc_row(version_id: int, d: Doc) -> tuple[Any, ...]:
    return version_id, d.cell, d.vid, d.event_index, d.namespace, d.keywords, d.value, d.evidence
