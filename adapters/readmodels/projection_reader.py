"""Reads answered from the frontier projection's tables by interval queries (no replay).

A row is valid as of event index N when it started at or before N and had not ended by N:
``from_index <= N AND (to_index IS NULL OR to_index > N)`` for statuses, ``event_index <= N`` for
evidence. The reads use the base tables, not the ``version_status`` and ``evidence`` views over them:
a version's current status (``status``, ``status_since``) and creating evidence (``created_*``) come
with its ``versions`` row, the closed status runs from ``status_history`` and the later evidence from
``evidence_events``, each one primary-key range lookup per cell. A cell's open intervals are derived
here from its status rows that began by N (the last one per version is the status valid at N), not
read from the ``intervals`` view, which would run its window function for every read; a ``closed_at``
after N reads as still open. "Now" is N = :data:`~projections.frontier_view.FOREVER`. Each read runs
in one read transaction, so it sees one committed position even while another process is catching
the projection up.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from pmem.projections.frontier import OPEN_SQL
from pmem.projections.frontier_view import FOREVER, ProjectedCell, VersionRows, assemble, open_intervals, summarize

# The open versions of a namespace's cells now: a version's current status is a column of its row ...
_NOW = ("SELECT c.cell_id, c.key, v.value, v.status FROM cells c JOIN versions v ON v.cell_id = c.cell_id "
        f"WHERE c.namespace = :ns AND v.status IN ({OPEN_SQL}) ORDER BY c.key, v.vid")
# ... and as of N, the status rows valid at N through the ``version_status`` view (on SQLite faster than
# the union of the two joins on its base tables written out: docs/projections.md)
_AS_OF = ("SELECT c.cell_id, c.key, v.value, s.status FROM cells c "
          "JOIN version_status s ON s.cell_id = c.cell_id "
          "JOIN versions v ON v.cell_id = s.cell_id AND v.vid = s.vid "
          "WHERE c.namespace = :ns AND s.from_index <= :n AND (s.to_index IS NULL OR s.to_index > :n) "
          f"AND s.status IN ({OPEN_SQL}) ORDER BY c.key, s.vid")

# One page of keys for :meth:`ProjectionReader.frontier_page`: the next ``limit`` cells by key (the
# ``cells_namespace_key`` index), then the open versions of those cells alone, by the key range they span.
_KEYS = ("SELECT key FROM cells WHERE namespace = :ns AND key > :after AND first_index <= :n "
         "ORDER BY key LIMIT :limit")
_RANGE = "c.namespace = :ns AND c.key > :after AND c.key <= :last"
_IDS_AT_ONCE = 500  # cells read by one ``IN (...)`` query (SQLite binds at most 32,766 values)


class ProjectionReader:
    """The read side the Store uses: the same methods as ``ReplayReader``, answered from tables."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn  # an pmem.adapters.storage.projection_db.ProjectionDb

    def timeline(self, cid: UUID, as_of: int | None = None) -> ProjectedCell | None:
        """One cell as of ``as_of`` (None when it had no event by then, as for the fold)."""
        with self._snapshot():
            return self._cell(cid.hex, FOREVER if as_of is None else as_of)

    def timelines(self, cids: list[UUID], as_of: int | None = None) -> list[ProjectedCell | None]:
        """:meth:`timeline` of each of ``cids``, read in one snapshot."""
        n = FOREVER if as_of is None else as_of
        with self._snapshot():
            ids = list(dict.fromkeys(cid.hex for cid in cids))
            found: dict[str, ProjectedCell] = {}
            for start in range(0, len(ids), _IDS_AT_ONCE):
                found.update(self._many(ids[start:start + _IDS_AT_ONCE], n))
        return [found.get(cid.hex) for cid in cids]

    def frontier(self, namespace: str, as_of: int | None = None, *,
                 with_versions: bool = True) -> list[ProjectedCell]:
        """Every cell of ``namespace`` with a head as of ``as_of``, by key."""
        n = FOREVER if as_of is None else as_of
        with self._snapshot():
            rows = self.conn.execute(_NOW if n == FOREVER else _AS_OF, {"ns": namespace, "n": n}).fetchall()
            return self._cells(namespace, n, rows, with_versions)

    def frontier_page(self, namespace: str, as_of: int | None = None, *, after: str = "", limit: int,
                      with_versions: bool = True) -> tuple[list[ProjectedCell], str | None]:
        """The cells with a head as of ``as_of`` among the next ``limit`` keys after ``after``, by key, and
        the last key looked at (None: no key is left). Costs what ``limit`` cells cost, whatever the
        namespace holds: the keys come from the index, the versions by their key range."""
        n = FOREVER if as_of is None else as_of
        with self._snapshot():
            keys = [k for (k,) in self.conn.execute(_KEYS, {"ns": namespace, "after": after, "n": n,
                                                            "limit": limit}).fetchall()]
            if not keys:
                return [], None
            sql = (_NOW if n == FOREVER else _AS_OF).replace("c.namespace = :ns", _RANGE)
            rows = self.conn.execute(sql, {"ns": namespace, "n": n, "after": after, "last": keys[-1]}).fetchall()
            out = self._cells(namespace, n, rows, with_versions)
        return out, keys[-1] if len(keys) == limit else None

    def _cells(self, namespace: str, n: int, rows: list[Any], with_versions: bool) -> list[ProjectedCell]:
        """The non-empty cells of ``rows`` (cell_id, key, value, status of each open version), in order."""
        grouped: dict[str, tuple[str, list[tuple[str, str]]]] = {}
        for cid, key, value, status in rows:
            grouped.setdefault(cid, (key, []))[1].append((value, status))
        out = []
        for cid, (key, pairs) in grouped.items():
            cell = self._cell(cid, n) if with_versions else summarize(namespace, key, pairs)
            if cell is not None and cell.value is not None:
                out.append(cell)
        return out

    def _cell(self, cid: str, n: int) -> ProjectedCell | None:
        return self._many([cid], n).get(cid)

    def _many(self, cids: list[str], n: int) -> dict[str, ProjectedCell]:
        """The cells of ``cids`` (distinct) that had an event by ``n``, by id: four queries for all of them
        (a search reads its dozen results at once)."""
        ids = cids
        where = f"cell_id IN ({','.join('?' * len(ids))})"
        names = {cid: (ns, key) for cid, ns, key in self.conn.execute(
            f"SELECT cell_id, namespace, key FROM cells WHERE {where} AND first_index <= ?", (*ids, n))}
        if not names:
            return {}
        statuses: dict[tuple[str, int], list[tuple[str, int, int | None]]] = {}
        for cid, vid, status, start, end in self.conn.execute(
                f"SELECT cell_id, vid, status, from_index, to_index FROM status_history WHERE {where} "
                "AND from_index <= ? ORDER BY cell_id, vid, from_index", (*ids, n)):
            statuses.setdefault((cid, vid), []).append((status, start, end))
        later: dict[tuple[str, int], list[tuple[int, str | None, int]]] = {}
        for cid, vid, index, source, trust in self.conn.execute(
                f"SELECT cell_id, vid, event_index, source, trust FROM evidence_events WHERE {where} "
                "AND event_index <= ? ORDER BY cell_id, vid, event_index", (*ids, n)):
            later.setdefault((cid, vid), []).append((index, source, trust))
        versions: dict[str, list[VersionRows]] = {cid: [] for cid in names}
        for cid, vid, value, sup, alt, status, since, created, source, trust in self.conn.execute(
                f"SELECT cell_id, vid, value, supersedes, alternative_of, status, status_since, created_index, "
                f"created_source, created_trust FROM versions WHERE {where} AND created_index <= ? "
                "ORDER BY cell_id, vid", (*ids, n)):
            runs = statuses.get((cid, vid), [])
            if since <= n:  # the current status began by N: it is the last run, still open
                runs.append((status, since, None))
            # a version's last status run that began by N is its status at N
            versions[cid].append(VersionRows(vid, value, sup, alt, runs[-1][0], open_intervals(runs, n),
                                             [(created, source, trust), *later.get((cid, vid), ())]))
        return {cid: assemble(ns, key, versions[cid]) for cid, (ns, key) in names.items()}

    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        with self.conn.snapshot():
            yield
