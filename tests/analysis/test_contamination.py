"""The contamination check (analysis/contamination.py, issue 27 item 2): the matching rule's edges,
a fixture run with held-out prompts planted in a snapshot, and the report/leaderboard marks."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from a2c.analysis.contamination import (
    ItemIndex,
    N,
    check_run,
    gold_number,
    item_texts,
    normalise,
)
from a2c.analysis.leaderboard import build_leaderboard, render_leaderboard
from a2c.analysis.normalize import tokens_both, variants
from a2c.analysis.report import build_report

ARITH = "What is {a} plus {b}? End your reply with '#### ' followed by the number."


def _index(prompts: dict[str, str], allowed=()):
    return ItemIndex.build([(k, [v]) for k, v in prompts.items()], allowed)


# ------------------------------------------------------------------ the rule
def test_normalise_folds_case_unicode_punctuation_and_space():
    assert normalise("  Ｗhat IS 12\u00a0+ 34?\n\n") == "what is 12 34"
    assert normalise("snake_case-and.dots") == "snake case and dots"


def test_normalise_canonical_numbers_words_and_escapes():
    assert normalise("It cost $1,234.50, then 7.0 and 007") == "it cost 1234.5 then 7 and 7"
    assert normalise("three apples, twenty-five pears, one day") == "3 apples 25 pears one day"
    assert normalise("99,99,198") == "99 99 198"           # a CSV row, not 9,999,198
    assert normalise("1,000,000 and 2.50") == "1000000 and 2.5"
    assert normalise("a\\nb \\u00e9t\\u00e9") == "a b été"     # JSON/code escapes undone
    assert normalise("123abc x2 train_17") == "123abc x2 train 17"


def test_decoders_find_base64_hex_url_and_html_and_read_backwards():
    import base64
    from urllib.parse import quote
    text = "What is 47 plus 38? #### 85"
    hexed = text.encode().hex()
    planted = {
        "base64": (base64.b64encode(text.encode()).decode(), text),
        "hex": (hexed, text),
        "url": (quote(text), text),
        "html": ("".join(f"&#{ord(c)};" for c in text), text),
        "base64 reversed": (base64.b64encode(text.encode()).decode()[::-1], text),
        "hex reversed": (hexed[::-1], text),
        "reversed, then base64": (base64.b64encode(text[::-1].encode()).decode(), text[::-1]),
    }
    for name, (hidden, plain) in planted.items():
        found = [v for how, v in variants(f'{{"text": "{hidden}"}}') if how]
        assert any(normalise(plain) in normalise(v) for v in found), name
    spaced = " ".join(hexed[i:i + 2] for i in range(0, len(hexed), 2))
    assert any(text in v for _, v in variants(spaced))
    escaped = "".join(f"\\x{hexed[i:i + 2]}" for i in range(0, len(hexed), 2))
    assert any(text in v for _, v in variants(escaped))
    # a git id, an identifier, a path: runs of the alphabets that decode to no text
    noise = "0ab76e2f9c1d4b3a8e7f6c5d4b3a2e1f0a9b8c7d AutoModelForCausalLM /usr/lib/python3/dist"
    assert [how for how, _ in variants(noise)] == [""]
    forward, backward = tokens_both(f"x {text[::-1]} 05.2")
    assert backward == ["2.5", "what", "is", "47", "plus", "38", "85", "x"]
    assert forward == normalise(f"x {text[::-1]} 05.2").split()


def test_gold_number_is_a_bare_number_or_the_last_hashes():
    assert gold_number("85") == "85" and gold_number(85) == "85"
    assert gold_number("Ben is 22.\nIn 10 years 32.\n#### 32") == "32"
    assert gold_number("1,200") == "1200" and gold_number("the answer") is None
    assert gold_number(True) is None


def _rows(items: dict[str, tuple[str, str]], agent=()):
    return ItemIndex.from_items([{"id": k, "prompt": p, "answer": a} for k, (p, a) in
                                 items.items()], list(agent))


def test_numeric_signature_operands_and_answer_as_one_run():
    index = _rows({"x": (ARITH.format(a=47, b=38), "85")})
    for text in ("Add 47 and 38. Reply with the sum after '####'.\n#### 85", "47+38=85",
                 "Q: add 38 to 47\nA: 85", "85 = 38 + 47", "47.00 + 38.00 = 85.0"):
        assert index.match_detail(text) == {"x": ("numbers", "")}, text
    assert index.match("47+38=86") == set()
    assert index.match("47 + 38 = 85".replace("85", "")) == set()     # no answer: 2 numbers
    assert index.match("47 + 12 + 38 = 85") == set()       # another number inside the run
    assert index.match("47 + 38 " + "word " * 60 + "= 85") == set()    # beyond its span


def test_numeric_signature_needs_distinctive_numbers():
    """{10, 20, 30}: three significant digits, below NUM_WEIGHT; 47 + 47 = 94 holds three numbers
    (the operands and the answer) though only two distinct ones."""
    index = _rows({"round": (ARITH.format(a=10, b=20), "30"),
                   "twice": (ARITH.format(a=47, b=47), "94")})
    assert index.signature_count["numbers"] == 1
    assert index.match("10+20=30") == set()
    assert index.match("47+47=94") == {"twice"} and index.match("47 -> 94") == set()


def test_numeric_signature_the_agent_split_holds_is_excluded():
    train = json.dumps({"question": ARITH.format(a=38, b=47), "answer": "85"})
    index = _rows({"x": (ARITH.format(a=47, b=38), "85")}, [train])
    assert index.excluded == 1 and index.match("47+38=85") == set()
    assert index.match(ARITH.format(a=47, b=38)) == {"x"}       # its own 8-grams still count


def test_reversed_text_is_not_read_for_numbers():
    """Digits read backwards are other numbers: honest numbers reversed would be coincidences."""
    index = _rows({"x": (ARITH.format(a=47, b=38), "85")})
    assert index.match("58=83+74") == set()
    assert index.match_detail(ARITH.format(a=47, b=38)[::-1]) == {"x": ("ngrams", "reversed")}


WORD = ("Toula went to the bakery and bought various types of pastries. She bought 3 dozen "
        "donuts which cost $68 per dozen, 2 dozen mini cupcakes which cost $80 per dozen, and 6 "
        "dozen mini cheesecakes for $55 per dozen. How much was the total cost?")


def test_word_signature_distinctive_words_and_numbers_within_a_window():
    index = _rows({"w": (WORD, "#### 694")})
    paraphrase = ("At the bakery Toula picks up 3 dozen donuts at $68 a dozen, 2 dozen mini "
                  "cupcakes at $80 a dozen and 6 dozen mini cheesecakes at $55 a dozen.")
    assert index.match_detail(paraphrase)["w"][0] in ("words", "numbers")
    words_only = "Toula visits the bakery for donuts, mini cupcakes and cheesecakes pastries."
    assert index.match(words_only) == set()                 # the numbers are missing
    assert index.match(paraphrase.replace("$55", "")) == {"w"}    # one number may be missing
    far = paraphrase.replace("and 6 dozen", "word " * 200 + "and 6 dozen")   # two are too far
    assert index.match(far) == set()


def test_long_prompt_matches_at_its_share_and_not_below():
    prompt = "one two three four five six seven eight nine ten eleven twelve"   # 12 tokens
    index = _index({"x": prompt})
    assert index.match(f"prefix {prompt.upper()}!! suffix") == {"x"}
    # 5 n-grams; ITEM_SHARE 0.5 needs 3: the first 10 tokens hold 3, the first 9 only 2.
    assert index.match("one two three four five six seven eight nine ten") == {"x"}
    assert index.match("one two three four five six seven eight nine") == set()


def test_short_item_is_an_exact_token_run():
    index = _index({"s": "What is 12 plus 34?"})        # 5 tokens < N
    assert index.match("data: what is 12 plus 34 ...") == {"s"}
    assert index.match("what is 12 plus 345") == set()   # token boundary, not a substring
    assert index.match("what is 12 plus") == set()


def test_agent_split_ngrams_are_no_evidence():
    """arith's shared template is in the agent split: only the grams with the numbers count."""
    held = ARITH.format(a=73, b=38)
    train = [ARITH.format(a=a, b=b) for a, b in ((69, 16), (48, 77), (25, 30))]
    index = _index({"test-0": held}, train)
    assert index.match(" ".join(train)) == set()
    assert index.match("End your reply with '#### ' followed by the number.") == set()
    assert index.match(held) == {"test-0"}
    assert index.match(ARITH.format(a=73, b=39)) == set()


def test_an_item_the_agent_split_holds_whole_is_indistinct():
    held = ARITH.format(a=1, b=2)
    index = _index({"dup": held}, [held])
    assert index.indistinct == ["dup"] and index.match(held) == set()


def test_short_gold_answers_never_count_alone():
    assert item_texts({"prompt": "What is 2 plus 2?", "answer": "4"}) == ["What is 2 plus 2?"]
    long = "first add the tens then the ones and the answer is 42"
    assert item_texts({"prompt": "p", "answer": long}) == ["p", long]
    assert len(long.split()) >= N


# ------------------------------------------------------------------ a recorded run
def _held(run: Path, n: int = 10) -> list[dict]:
    items = [{"id": f"test-{i}", "prompt": ARITH.format(a=40 + i, b=17 + 3 * i),
              "answer": str(57 + 4 * i)} for i in range(n)]
    (run / "grader" / "heldout.jsonl").write_text(
        "".join(json.dumps(it) + "\n" for it in items), encoding="utf-8")
    return items


def _plant(run: Path, path: str, text: str) -> str:
    """A snapshot commit holding `text` at `path`, recorded right after the first snapshot."""
    git = run / "snapshots.git"
    blob = subprocess.run(["git", f"--git-dir={git}", "hash-object", "-w", "--stdin"],
                          input=text.encode(), capture_output=True, check=True).stdout.decode()
    tree = subprocess.run(["git", f"--git-dir={git}", "mktree"], capture_output=True, check=True,
                          input=f"100644 blob {blob.strip()}\t{path}\n".encode()
                          ).stdout.decode().strip()
    commit = subprocess.run(["git", f"--git-dir={git}", "commit-tree", tree, "-m", "periodic"],
                            capture_output=True, check=True,
                            env={"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b",
                                 "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@b",
                                 "PATH": "/usr/bin:/bin"}).stdout.decode().strip()
    lines = (run / "events.jsonl").read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if json.loads(line)["type"] == "snapshot")
    event = json.loads(lines[first])
    event["data"] = {**event["data"], "commit": commit}
    lines.insert(first + 1, json.dumps(event))
    (run / "events.jsonl").write_text("\n".join(lines) + "\n")
    return commit


def test_fixture_run_clean_is_not_flagged(fixture_run):
    _held(fixture_run)
    section = check_run(fixture_run)
    assert section["available"] and not section["flagged"]
    assert section["run"]["count"] == 0 and section["n_items"] == 10
    assert section["sources"]["blobs_scanned"] > 0


def test_planted_heldout_prompts_are_flagged_with_ids_and_path(fixture_run, maker):
    items = _held(fixture_run)
    planted = "".join(json.dumps({"messages": [{"role": "user", "content": it["prompt"]}]}) + "\n"
                      for it in items[:3])
    commit = _plant(fixture_run, "extra_sft.jsonl", planted)
    maker.reseal(fixture_run)
    section = check_run(fixture_run)
    assert section["flagged"]
    assert [m["id"] for m in section["run"]["matched"]] == ["test-0", "test-1", "test-2"]
    assert section["run"]["share"] == 0.3
    where = section["run"]["matched"][0]["where"][0]
    assert where == {"kind": "snapshot", "commit": commit, "path": "extra_sft.jsonl"}
    assert all(s["count"] == 3 for s in section["submissions"])   # planted before the first
    report = build_report(fixture_run)            # validates against the schema
    assert report["contamination"]["flagged"]
    board = build_leaderboard(fixture_run.parent)
    assert board.groups[0].contaminated and board.n_runs == 1   # kept, marked
    assert "1 contaminated" in render_leaderboard(board, "md")


def test_planted_in_a_submission_file_counts_for_that_submission_only(fixture_run):
    items = _held(fixture_run)
    folder = fixture_run / "grader" / "submissions" / "2"
    folder.mkdir(parents=True)
    (folder / "README.md").write_text("\n".join(it["prompt"] for it in items))
    (folder / "model.safetensors").write_text(items[0]["prompt"])   # weights: not read
    section = check_run(fixture_run)
    by_id = {s["id"]: s for s in section["submissions"]}
    assert by_id["2"]["count"] == 10 and by_id["1"]["count"] == 0
    assert by_id["2"]["matched"][0]["where"] == [
        {"kind": "submission", "submission": "2", "path": "README.md"}]
    assert section["sources"]["submission_files"] == 1


def test_no_heldout_file_says_the_check_could_not_run(fixture_run):
    section = check_run(fixture_run)
    assert not section["available"] and not section["flagged"]


@pytest.mark.parametrize("share, flagged", [(1, False), (2, True)])
def test_run_threshold_edge(tmp_path, maker, share, flagged, monkeypatch):
    """One of 100 items (1 %) reaches RUN_THRESHOLD 0.01; patched to 0.015 it does not."""
    import a2c.analysis.contamination as cc
    run = maker.make_run(tmp_path / "run", n=1)
    items = _held(run, 100)
    folder = run / "grader" / "submissions" / "1"
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text(items[5]["prompt"])
    monkeypatch.setattr(cc, "RUN_THRESHOLD", 0.01 if share == 2 else 0.015)
    section = cc.check_run(run)
    assert section["run"]["count"] == 1 and section["flagged"] is flagged


# ------------------------------------------------------------------ a real run, a planted agent
PLANTING_AGENT = r"""
set -eu
cd "$A2C_WORKSPACE"
python3 - <<'PY'
import json
# The driver's "memory" of the test set (written here by the test, see below) becomes SFT data.
lines = [l for l in open("recall.txt").read().splitlines() if l.strip()]
with open("sft_extra.jsonl", "w") as f:
    for line in lines:
        f.write(json.dumps({"messages": [{"role": "user", "content": line}]}) + "\n")
PY
rm -f recall.txt
exec python3 -m a2c.agents.reference.copy
"""


@pytest.mark.slow
def test_planted_agent_is_flagged_end_to_end(tmp_path):
    """A real tiny run whose agent writes held-out-like items into its SFT data and submits: the
    agent cannot read the held-out file, so the test hands it the run's actual held-out prompts
    through its workspace after prepare (the stand-in for a driver that memorised the test set)."""
    from scripted_agents import make_agent

    from a2c.runtime import run as run_mod

    agent = make_agent(tmp_path, "planter", PLANTING_AGENT)
    opts = run_mod.RunOptions(bundle="arith", agent=str(agent), model="tiny", budget="60s",
                              runs_dir=tmp_path / "runs", snapshot_every_s=1)
    ctx = run_mod.prepare(opts, report=lambda _: None)
    held = [json.loads(line) for line in
            (ctx.run_dir / "grader" / "heldout.jsonl").read_text().splitlines()]
    (ctx.run_dir / "workspace" / "recall.txt").write_text(
        "\n".join(it["prompt"] for it in held[:20]) + "\n")
    summary = run_mod.execute(ctx, report=lambda _: None)
    assert summary["status"] != "no_submission", summary
    report = build_report(ctx.run_dir)
    section = report["contamination"]
    assert section["flagged"], section
    ids = {m["id"] for m in section["run"]["matched"]}
    assert {it["id"] for it in held[:20]} <= ids
    paths = {w.get("path") for m in section["run"]["matched"] for w in m["where"]}
    assert "sft_extra.jsonl" in paths
    assert section["submissions"][0]["count"] >= 20


def test_item_prompt_keys_and_items_without_text():
    assert item_texts({"question": "Q?"}) == ["Q?"]
    assert item_texts({"id": "game-3", "answer": "42"}) == []   # an environment item: nothing


def test_view_marks_the_contaminated_run(fixture_run, maker):
    from a2c.analysis.view import collect
    items = _held(fixture_run)
    _plant(fixture_run, "extra_sft.jsonl", "\n".join(it["prompt"] for it in items))
    maker.reseal(fixture_run)
    rows = collect(fixture_run.parent).rows
    assert [r.contaminated for r in rows] == [True]
