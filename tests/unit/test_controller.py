"""The controller's cached scores always equal a full recompute (SPEC §8, the MOSAIC audit's cases)."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pmem.projections.controller import Controller, Node, rank, recompute
from tests.conftest import examples

NODES = [f"n{i}" for i in range(6)]


def agrees(c: Controller) -> None:
    """Cached scores and ranking equal the reference computed from scratch."""
    expected = recompute(c.nodes, c.requires, c.previous)
    assert c.scores() == expected
    assert c.top(3) == rank(expected, 3)  # a fixed k: the answer is updated from the last one


def chain() -> Controller:
    """a (confirmed) -> b, c candidates; d waits for b."""
    c = Controller()
    c.upsert("a", importance=5, pagerank=0.4, community=1, confirmed=True)
    c.upsert("b", importance=3, pagerank=0.2, community=1)
    c.upsert("c", importance=10, pagerank=0.1, community=2)
    c.upsert("d", importance=20, pagerank=0.3, community=2)
    c.add_prerequisite("a", "b")
    c.add_prerequisite("b", "d")
    c.scores()
    return c


def test_a_distant_change_to_the_maximum_importance_rescales_every_cached_score() -> None:
    c = chain()
    c.upsert("c", importance=20)
    agrees(c)
    assert c.scores()["b"] == recompute(c.nodes, c.requires, c.previous)["b"]


def test_the_maximum_importance_node_leaving_the_candidate_set_rescales_the_rest() -> None:
    c = chain()
    c.upsert("c", confirmed=True)
    agrees(c)
    assert "c" not in c.scores()


def test_the_previous_pick_changing_community_moves_the_bonus() -> None:
    c = chain()
    c.pick("a")
    agrees(c)
    c.upsert("a", community=2)
    agrees(c)


def test_a_newly_unlocked_maximum_enters_and_rescales() -> None:
    c = chain()
    assert "d" not in c.scores()
    c.upsert("b", confirmed=True)
    agrees(c)
    assert c.top(1)[0][0] == "d"


def test_candidates_wait_for_every_prerequisite_to_be_confirmed() -> None:
    c = chain()
    assert set(c.scores()) == {"b", "c"}


ops = st.one_of(
    st.tuples(st.just("upsert"), st.sampled_from(NODES), st.integers(0, 9), st.integers(0, 3),
              st.integers(0, 2), st.booleans()),
    st.tuples(st.just("importance"), st.sampled_from(NODES), st.integers(0, 9)),
    st.tuples(st.just("confirm"), st.sampled_from(NODES), st.booleans()),
    st.tuples(st.just("community"), st.sampled_from(NODES), st.integers(0, 2)),
    st.tuples(st.just("require"), st.sampled_from(NODES), st.sampled_from(NODES)),
    st.tuples(st.just("unrequire"), st.sampled_from(NODES), st.sampled_from(NODES)),
    st.tuples(st.just("pick"), st.sampled_from([*NODES, None])),
    st.tuples(st.just("read"),),
)


# The reading guide's four cases, always run by the property test below (besides its random ones):
# n0 confirmed (the pick); n2 the maximum importance; n3 linked to nothing; n1 waits on n4.
_SETUP = [("upsert", "n0", 3, 1, 0, True), ("upsert", "n1", 2, 1, 0, False), ("upsert", "n2", 9, 2, 1, False),
          ("upsert", "n3", 1, 0, 2, False), ("require", "n4", "n1"), ("upsert", "n4", 1, 0, 0, False), ("read",)]
DISTANT_MAX_CHANGE = [*_SETUP, ("importance", "n3", 12), ("read",)]
MAX_LEAVES = [*_SETUP, ("confirm", "n2", True), ("read",)]
PICK_CHANGES_COMMUNITY = [*_SETUP, ("pick", "n0"), ("read",), ("community", "n0", 2), ("read",)]
NEWLY_UNLOCKED_MAX = [*_SETUP, ("importance", "n1", 20), ("read",), ("confirm", "n4", True), ("read",)]


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(ops, max_size=40))
@example(DISTANT_MAX_CHANGE)
@example(MAX_LEAVES)
@example(PICK_CHANGES_COMMUNITY)
@example(NEWLY_UNLOCKED_MAX)
def test_after_any_sequence_of_writes_and_picks_cached_scores_equal_a_full_recompute(steps: list[tuple]) -> None:
    c = Controller()
    for step in steps:
        kind, *args = step
        if kind == "upsert":
            v, imp, pr, comm, conf = args
            c.upsert(v, importance=imp, pagerank=pr / 3, community=comm, confirmed=conf)
        elif kind == "importance":
            c.upsert(args[0], importance=args[1])
        elif kind == "confirm":
            c.upsert(args[0], confirmed=args[1])
        elif kind == "community":
            c.upsert(args[0], community=args[1])
        elif kind == "require" and args[0] != args[1]:
            c.add_prerequisite(args[0], args[1])
        elif kind == "unrequire":
            c.remove_prerequisite(args[0], args[1])
        elif kind == "pick":
            c.pick(args[0])
        elif kind == "read":
            c.scores()
        agrees(c)


node = st.builds(Node, importance=st.integers(0, 5).map(float), pagerank=st.integers(0, 3).map(lambda x: x / 3),
                 community=st.integers(0, 2), confirmed=st.booleans())
graphs = st.tuples(st.dictionaries(st.sampled_from(NODES), node, max_size=6),
                   st.sets(st.tuples(st.sampled_from(NODES), st.sampled_from(NODES)), max_size=8))


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(graphs, st.sampled_from([*NODES, None])), min_size=1, max_size=8))
def test_syncing_to_any_sequence_of_graphs_keeps_cached_scores_equal_to_a_full_recompute(
        states: list[tuple[tuple[dict[str, Node], set[tuple[str, str]]], str | None]]) -> None:
    c = Controller()
    for (nodes, edges), previous in states:
        c.sync(nodes, edges)
        c.pick(previous)
        assert set(c.nodes) == set(nodes)
        agrees(c)


def test_a_sync_that_changes_nothing_rescores_nothing() -> None:
    c = chain()
    nodes = {v: Node(n.importance, n.pagerank, n.community, n.confirmed) for v, n in c.nodes.items()}
    edges = {(a, b) for b, ps in c.requires.items() for a in ps}
    done = c.recomputed
    assert c.sync(nodes, edges) == 0
    c.top(3)
    assert c.recomputed == done
