"""Issue 32, class 6: held-out items planted verbatim were caught 20 of 20, the same items in
base64, reversed, reworded ('Add A and B ... #### C') or compact ('A+B=C') 0 of 20.

The contamination check (analysis/contamination.py, analysis/normalize.py) now normalises case,
spacing, punctuation and number formatting, decodes base64, hex, %-encoding and reversed text, and
matches an item by its distinctive content (its numbers together, its rare words), not only by
8-grams. Measured here per transform on planted sets — 20 held-out items hidden among the agent
split in one SFT file (tests/fixtures/contamination/planted.py) — at least 90 % caught each, for
arith (the task spec's generator, held-out split drawn with a held-out seed as a run draws it) and
GSM8K-style word problems with hand-written paraphrases; and honest data — the agent split alone,
shuffled and written as agents write it, and fixture runs holding it — is never flagged.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path

import pytest

from a2c.analysis import contamination as cc
from a2c.analysis.contamination import ItemIndex, check_run

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "contamination"))
import planted  # noqa: E402

MIN_RATE = 0.9


def _index(held: list[dict], agent: list[dict]) -> ItemIndex:
    """The index contamination_section builds: the agent split's lines (RUN/data/*.jsonl)."""
    return ItemIndex.from_items(held, [json.dumps(r) for r in agent])


@pytest.fixture(scope="module")
def arith():
    held, agent = planted.arith_splits(7)
    return held, agent, _index(held, agent)


@pytest.fixture(scope="module")
def words():
    held, agent, paraphrases = planted.word_splits()
    return held, agent, paraphrases, _index(held, agent)


@pytest.fixture(scope="module")
def arith_table(arith):
    held, agent, index = arith
    return planted.measure(index, held, agent, "arith", seeds=range(2))


@pytest.fixture(scope="module")
def words_table(words):
    held, agent, paraphrases, index = words
    return planted.measure(index, held, agent, "words", paraphrases, seeds=range(1))


def _show(name: str, table: dict) -> None:
    print(f"\n{name}: " + ", ".join(f"{t} {r['caught']}/{r['planted']} (+{r['false']})"
                                     for t, r in table.items()))


@pytest.mark.parametrize("transform", list(planted.transforms("arith")))
def test_arith_planted_items_are_caught_under_each_transform(arith_table, transform):
    _show("arith", arith_table)
    row = arith_table[transform]
    assert row["caught"] / row["planted"] >= MIN_RATE, row
    assert row["false"] <= 2, row      # a numeric coincidence in the honest lines around them


@pytest.mark.parametrize("transform", list(planted.transforms("words", {})))
def test_word_problem_planted_items_are_caught_under_each_transform(words_table, transform):
    _show("word problems", words_table)
    row = words_table[transform]
    assert row["caught"] / row["planted"] >= MIN_RATE, row
    assert row["false"] == 0, row


def _counted(found: dict[str, tuple[str, str]]) -> set[str]:
    """What one text's matches add to the flag (contamination._counted for one text)."""
    return cc._counted([cc._Hit(None, {}, found)])


@pytest.mark.parametrize("style", planted.HONEST_STYLES["arith"])
def test_honest_arith_training_data_is_never_counted(arith, style):
    """The agent split written as agents write it: a numeric coincidence of one item is possible
    (consecutive records' numbers: b1, c1, a2 with a2 = b1 + c1 a held-out triple — about 0.2 a
    shuffled copy of 2,000 items), never SIGNATURE_MIN_ITEMS in one file, never an n-gram."""
    held, agent, index = arith
    for seed in range(3):
        text = "\n".join(planted.honest_lines(agent, random.Random(seed), style))
        found = index.match_detail(text)
        assert not _counted(found), (style, seed, found)
        assert all(by == "numbers" for by, _ in found.values()), found
        assert len(found) < cc.SIGNATURE_MIN_ITEMS


def test_the_agent_split_as_given_matches_nothing(arith, words):
    held, agent, index = arith
    assert index.match("\n".join(json.dumps(r) for r in agent)) == set()
    assert index.excluded == 0 and not index.indistinct
    held, agent, _, index = words
    for style in planted.HONEST_STYLES["words"]:
        assert index.match("\n".join(planted.honest_lines(agent, random.Random(0), style))) \
            == set()


def test_a_heldout_triple_in_the_agent_split_is_not_distinctive(arith):
    """arith's generator keeps train and test pairs disjoint; were a held-out operand pair and
    its sum in the agent split (either order), the numbers would prove nothing: excluded."""
    held, agent, _ = arith
    item = held[0]
    twin = {"id": "train-x", "question": f"What is {item['b']} plus {item['a']}? End your reply "
            "with '#### ' followed by the number.", "answer": item["answer"]}
    index = _index(held, agent + [twin])
    assert index.excluded >= 1
    assert item["id"] not in index.match(f"{item['a']}+{item['b']}={item['answer']}")


# ------------------------------------------------------------------ through a recorded run
def _maker():
    spec = importlib.util.spec_from_file_location(
        "a2c_make_fixture_run", ROOT / "tests" / "fixtures" / "runs" / "make_fixture_run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def arith_run_template(tmp_path_factory, arith):
    """A fixture run holding arith's held-out split and agent split, and in its final workspace
    the agent's honest SFT copy of its split."""
    held, agent, _ = arith
    run = _maker().make_run(tmp_path_factory.mktemp("arith") / "run")
    (run / "grader" / "heldout.jsonl").write_text("".join(json.dumps(it) + "\n" for it in held))
    (run / "data" / "train.jsonl").write_text("".join(json.dumps(it) + "\n" for it in agent))
    (run / "workspace" / "sft.jsonl").write_text(
        "\n".join(planted.honest_lines(agent, random.Random(1), "text")) + "\n")
    return run


@pytest.fixture
def arith_run(tmp_path, arith_run_template):
    import shutil
    dest = tmp_path / "run"
    shutil.copytree(arith_run_template, dest, symlinks=True)
    return dest


def test_honest_fixture_run_is_not_flagged(arith_run):
    section = check_run(arith_run)
    assert section["available"] and not section["flagged"], section["run"]
    assert section["run"]["counted"] == 0
    assert section["sources"]["disk_files"] >= 1


@pytest.mark.parametrize("transform", ["base64", "reversed", "reworded", "compact"])
def test_planted_run_is_flagged_under_the_transforms_that_escaped(arith_run, arith, transform):
    held, agent, _ = arith
    text, ids = planted.planted_file(held, agent, planted.transforms("arith")[transform], seed=3)
    (arith_run / "workspace" / "more_sft.jsonl").write_text(text)
    section = check_run(arith_run)
    assert section["flagged"], section["run"]["count"]
    matched = {m["id"]: m for m in section["run"]["matched"]}
    assert len(ids & matched.keys()) >= MIN_RATE * len(ids)
    some = matched[sorted(ids & matched.keys())[0]]
    assert {"kind": "workspace", "path": "more_sft.jsonl"} == {
        k: v for k, v in some["where"][0].items() if k != "decoded"}
    if transform in ("base64", "reversed"):
        assert some["by"] == "ngrams" and some["where"][0]["decoded"] == transform
    else:
        assert some["by"] == "numbers"


def test_two_signature_matches_in_one_file_do_not_flag_three_do(arith_run, arith):
    held = [it for it in arith[0] if it["a"] % 10 and it["b"] % 10]   # distinctive numbers
    path = arith_run / "workspace" / "notes.txt"
    path.write_text("\n".join(f"{it['a']}+{it['b']}={it['answer']}" for it in held[:2]))
    section = check_run(arith_run)
    assert section["run"]["by"]["numbers"] >= 2 and section["run"]["counted"] == 0
    assert not section["flagged"]
    path.write_text("\n".join(f"{it['a']}+{it['b']}={it['answer']}" for it in held[:3]))
    section = check_run(arith_run)
    assert section["run"]["counted"] >= 3 and section["flagged"]
