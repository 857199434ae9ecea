"""The log's SQL is written once: its table names stand in no string of the package but those of
``adapters/eventstore/log_sql.py``, and each dialect renders the same statement for its backend."""

from __future__ import annotations

import ast
import re

from pmem.adapters.eventstore import log_sql
from pmem.adapters.eventstore.log_sql import LogSql, PgDialect, SqliteDialect
from tests.conftest import ROOT

TABLES = (log_sql.SQLITE_EVENTS, log_sql.PG_EVENTS, log_sql.OP_IDS, log_sql.KEYS, log_sql.CELLS, log_sql.CHAIN,
          log_sql.STATE_AT)
NAMED = re.compile(rf"\b({'|'.join(TABLES)})\b")


def _strings(tree: ast.AST) -> list[ast.Constant]:
    """The string constants of a module that are not docstrings (of a module, class, function or name)."""
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_no_module_but_log_sql_names_a_table_of_the_log() -> None:
    found = []
    for folder in ("adapters", "domain", "projections", "pmem"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "adapters" / "eventstore" / "log_sql.py":
                continue
            for node in _strings(ast.parse(path.read_text(), str(path))):
                if NAMED.search(node.value):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value[:60]!r}")
    assert found == []


def test_a_list_and_a_table_of_rows_are_rendered_for_each_backend() -> None:
    sqlite, pg = LogSql(SqliteDialect()), LogSql(PgDialect("tenant"))
    assert sqlite.ids.keys_of(3) == "SELECT cell_id, life, key FROM pmem_keys WHERE cell_id IN (?,?,?)"
    assert pg.ids.keys_of(3) == 'SELECT cell_id, life, key FROM "tenant".pmem_keys WHERE cell_id = ANY(%s::text[])'
    sql, params = sqlite.log.rows_after([("a", 1), ("b", 2)], 9)
    assert "WITH w(id, v) AS (VALUES (?,?),(?,?))" in sql and params == ["a", 1, "b", 2, 9]
    sql, params = pg.log.rows_after([("a", 1), ("b", 2)], 9)
    assert "unnest(%s::uuid[], %s::bigint[])" in sql and params == [["a", "b"], [1, 2], 9]
    assert 'JOIN "tenant".pmem_events e' in sql and "translate(e.originator_id::text, '-', '')" in sql
