"""Export and import: a history written to a SQLite store, exported and imported into a new
SQLite file and into a PostgreSQL schema (the ``backend`` fixture), reads the same there: ``frontier
--as-of N`` for every N, every ``history``, the ``log``, the receipts of resent op ids; the stored rows,
op ids and live data keys are the source's byte for byte; a forgotten cell travels as forgotten."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

import pmem
from pmem.adapters.service.portability import copy, export_lines, import_lines, verify_stores
from tests.conftest import Backend

NAMESPACES = ("default", "other")
KEYS = ("city", "name", "pet")
OPS = ("accept", "contest", "reject", "revoke", "resolve", "support")

op_strategy = st.fixed_dictionaries({
    "op": st.sampled_from(OPS), "key": st.sampled_from(KEYS), "value": st.sampled_from("abc"),
    "trust": st.sampled_from((30, 50, 80)), "text": st.sampled_from((None, "said so")),
    "op_id": st.sampled_from((None, None, "m1", "m2", "m3")), "namespace": st.sampled_from(NAMESPACES)})
step_strategy = st.one_of(st.tuples(st.just("apply"), st.lists(op_strategy, min_size=1, max_size=4)),
                          st.tuples(st.just("forget"), st.sampled_from(KEYS), st.sampled_from(NAMESPACES)))


def write_history(db: str, steps: list[Any]) -> None:
    with pmem.open(db) as store:
        for step in steps:
            if step[0] == "forget":
                store.namespace = step[2]
                store.forget(step[1])
                continue
            for ns in NAMESPACES:  # one batch per namespace: the store's namespace names the batch's
                batch = [{k: v for k, v in d.items() if v is not None and k != "namespace"}
                         for d in step[1] if d["namespace"] == ns]
                if batch:
                    store.namespace = ns
                    store.apply(batch)


def raw_export(db: str) -> list[dict[str, Any]]:
    """The export of ``db`` with the header's ``source`` left out (the only line that names the backend)."""
    lines = [orjson.loads(line) for line in export_lines(db)]
    lines[0].pop("source")
    return lines


def views(db: str) -> dict[str, Any]:
    """Everything a reader sees: frontier as of every index, every history, the log, per namespace."""
    with pmem.open(db) as s:
        last = s.last_index()
        out: dict[str, Any] = {"last": last}
        for ns in NAMESPACES:
            out[ns, "frontier"] = [[v.to_dict() for v in s.frontier(as_of=n, namespace=ns, system=True)]
                                   for n in range(last + 1)]
            out[ns, "history"] = [s.history(k, namespace=ns).to_dict() for k in KEYS]
            out[ns, "log"] = s.log(namespace=ns)
        return out


def resend_receipts(db: str) -> list[Any]:
    """The receipts of every op id sent again (a different operation: a resend returns the first receipt)."""
    out = []
    with pmem.open(db) as s:
        for ns in NAMESPACES:
            s.namespace = ns
            out += [s.apply([{"op": "accept", "key": "resent", "value": "z", "op_id": oid}])[0]
                    for oid in ("m1", "m2", "m3")]
    return out


def test_a_history_reads_the_same_after_import_into_either_backend(backend: Backend, tmp_path: Path) -> None:
    @settings(max_examples=backend.max_examples(8, 4))
    @given(st.lists(step_strategy, min_size=1, max_size=10))
    def check(steps: list[Any]) -> None:
        source = str(tmp_path / f"src-{uuid.uuid4().hex[:8]}.db")
        write_history(source, steps)
        target = backend.new_url()
        result = import_lines(target, export_lines(source), "export.jsonl")
        assert result["last_index"] == pmem.open(source).last_index()
        assert raw_export(target) == raw_export(source)  # rows, op ids and keys verbatim
        assert views(target) == views(source)
        assert resend_receipts(target) == resend_receipts(source)
        with pmem.open(source) as a, pmem.open(target) as b:  # a new op id appends at the same index
            assert a.last_index() == b.last_index()
    check()


def test_a_forgotten_cell_exports_as_forgotten_with_no_key(backend: Backend, tmp_path: Path) -> None:
    source = str(tmp_path / "src.db")
    with pmem.open(source) as s:
        s.accept("diagnosis", "flu", text="the patient said flu")
        s.accept("city", "Paris", text="lives in Paris")
        s.forget("diagnosis")
    text = b"".join(export_lines(source))
    assert b"flu" not in text and b"Paris" not in text  # sealed: no plaintext in the file at all
    keys = [orjson.loads(line)["key"][0] for line in text.splitlines() if line.startswith(b'{"key"')]
    with pmem.open(source) as s:
        city = s.log()[1]
    assert len(keys) == 1  # the city's key travels; the forgotten cell's is gone
    target = backend.new_url()
    import_lines(target, text.splitlines(keepends=True), "export.jsonl")
    with pmem.open(target) as t:
        assert t.get("city").value == "Paris" and t.log()[1] == city
        assert t.get("diagnosis").status == "empty"
        assert t.log()[0]["value"] == "<forgotten>" and t.log()[0]["text"] == "<forgotten>"


def test_copy_verifies_and_the_copy_takes_new_writes_after_the_source_s_last_index(backend: Backend,
                                                                                  tmp_path: Path) -> None:
    source = str(tmp_path / "src.db")
    with pmem.open(source) as s:
        s.apply([{"op": "accept", "key": f"k{i}", "value": str(i), "op_id": f"o{i}"} for i in range(20)])
        s.contest("k3", "x")
    target = backend.new_url()
    out = copy(source, target, verify=True)
    assert out["imported"] == 21 and out["op_ids"] == 20 and out["verified"][-1] == 21
    with pmem.open(target) as t:
        r = t.accept("k3", "y")
        assert r.event_index == 22 and t.get("k3").value == "y"
        assert t.accept("k0", "other", op_id="o0").event_index == 1  # a resend finds its receipt
    assert verify_stores(target, target, source_reader="replay")[-1] == 22


def test_a_namespace_export_holds_that_namespace_only(tmp_path: Path) -> None:
    source = str(tmp_path / "src.db")
    with pmem.open(source, namespace="a") as s:
        s.accept("x", "1", op_id="p")
        s.namespace = "b"
        s.accept("y", "2", op_id="q")
    lines = [orjson.loads(line) for line in export_lines(source, namespace="b")]
    assert lines[0]["namespace"] == "b" and lines[0]["last_index"] == 2
    assert [line["i"] for line in lines if "i" in line] == [2]
    assert [line["op_id"] for line in lines if "op_id" in line] == [["b", "q", 2]]
    assert len([line for line in lines if "key" in line]) == 1
    assert lines[-1] == {"end": {"events": 1, "op_ids": 1, "keys": 1}}


def test_an_edition_1_store_and_its_migration_keep_their_key_rule_after_import(backend: Backend,
                                                                                tmp_path: Path) -> None:
    import shutil

    from tests.conftest import ROOT

    source = str(tmp_path / "old.sqlite3")
    shutil.copy(ROOT / "tests" / "data" / "edition1_store" / "store.sqlite3", source)
    first = backend.new_url()
    import_lines(first, export_lines(source), "old.jsonl")
    with pmem.open(source) as s, pmem.open(first) as t:
        assert s.key_edition == t.key_edition == 1
        before = s.last_index()
        s.migrate_keys(["Größe", "café"])  # edition 2 from here on (key_edition_since)
    second = backend.new_url()
    import_lines(second, export_lines(source), "migrated.jsonl")
    header = orjson.loads(next(export_lines(second)))
    assert header["key_edition"] == 2 and header["key_edition_since"] == before + 1
    assert views(second) == views(source)
    with pmem.open(source) as s, pmem.open(second) as t:
        for ns in ("default", "alice"):
            for key in ("Größe", "GRÖSSE", "café", "caf"):
                for n in (before, s.last_index()):
                    assert t.get(key, as_of=n, namespace=ns).to_dict() == s.get(key, as_of=n, namespace=ns).to_dict()
