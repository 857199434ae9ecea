"""Reads answered from the frontier projection's tables by interval queries (no replay).

A row is valid as of event index N when it started at or before N and had not ended by N:
``from_index <= N AND (to_index IS NULL OR to_index > N)`` for statuses, ``opened_at <= N`` (with a
later ``closed_at`` read as still open) for intervals, ``event_index <= N`` for evidence. "Now" is
N = :data:`~projections.frontier_view.FOREVER`. Each read runs in one read transaction, so it
sees one committed position even while another process is catching the projection up.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from projections.frontier_view import FOREVER, ProjectedCell, VersionRows, assemble, clip, summarize

_VALID_STATUS = "s.from_index <= :n AND (s.to_index IS NULL OR s.to_index > :n)"


class ProjectionReader:
    """The read side the Store uses: the same methods as ``ReplayReader``, answered from tables."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn  # an adapters.projection_db.ProjectionDb

    def timeline(self, cid: UUID, as_of: int | None = None) -> ProjectedCell | None:
        """One cell as of ``as_of`` (None when it had no event by then, as for the fold)."""
        with self._snapshot():
            return self._cell(cid.hex, FOREVER if as_of is None else as_of)

    def frontier(self, namespace: str, as_of: int | None = None, *,
                 with_versions: bool = True) -> list[ProjectedCell]:
        """Every cell of ``namespace`` with a head as of ``as_of``, by key."""
        n = FOREVER if as_of is None else as_of
        with self._snapshot():
            rows = self.conn.execute(
                "SELECT c.cell_id, c.key, v.value, s.status FROM cells c "
                "JOIN version_status s ON s.cell_id = c.cell_id "
                "JOIN versions v ON v.cell_id = s.cell_id AND v.vid = s.vid "
                f"WHERE c.namespace = :ns AND {_VALID_STATUS} "
                "AND s.status IN ('active', 'contested', 'alternative') ORDER BY c.key, s.vid",
                {"ns": namespace, "n": n}).fetchall()
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
        found = self.conn.execute("SELECT namespace, key FROM cells WHERE cell_id = ? AND first_index <= ?",
                                  (cid, n)).fetchone()
        if found is None:
            return None
        args = {"cid": cid, "n": n}
        statuses = dict(self.conn.execute(
            f"SELECT s.vid, s.status FROM version_status s WHERE s.cell_id = :cid AND {_VALID_STATUS}", args))
        intervals: dict[int, list[tuple[int, int | None]]] = {}
        for vid, opened, closed in self.conn.execute(
                "SELECT vid, opened_at, closed_at FROM intervals WHERE cell_id = :cid AND opened_at <= :n "
                "ORDER BY vid, opened_at", args):
            intervals.setdefault(vid, []).append(clip(opened, closed, n))
        evidence: dict[int, list[tuple[int, str | None, int]]] = {}
        for vid, index, source, trust in self.conn.execute(
                "SELECT vid, event_index, source, trust FROM evidence WHERE cell_id = :cid "
                "AND event_index <= :n ORDER BY vid, event_index", args):
            evidence.setdefault(vid, []).append((index, source, trust))
        versions = [
            VersionRows(vid, value, sup, alt, statuses[vid], intervals[vid], evidence[vid])
            for vid, value, sup, alt in self.conn.execute(
                "SELECT vid, value, supersedes, alternative_of FROM versions WHERE cell_id = :cid "
                "AND created_index <= :n ORDER BY vid", args)]
        return assemble(found[0], found[1], versions)

    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        with self.conn.snapshot():
            yield
