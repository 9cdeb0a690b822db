"""Contamination check: did held-out (or final) items reach what the agent wrote or trained on?

The driver models have read public test sets (GSM8K, HumanEval); an agent that writes test
problems from its driver's memory into its training data scores high for the wrong reason. This
check is deterministic: every text the agent produced — its workspace at every snapshot
(including the files captured from outside it under `.a2c-outside/`), the non-weight files of
each submission copy the grader still holds, and the driver model's outputs in the trajectory —
is compared with the held-out and final items by token n-gram overlap.

The rule (docs/analysis.md, "Contamination"):

- text is normalised: Unicode NFKC, lowercase, punctuation and `_` become spaces, whitespace
  collapses; tokens are the words that remain;
- an item's texts are its prompt, and its gold answer only when the answer has at least `N`
  tokens (a bare number is far too short to count by itself);
- a text of at least `N` tokens is its set of `N`-grams, less every n-gram that also occurs in the
  agent split (RUN/data: what the agent legitimately received — shared templates such as arith's
  "End your reply with ..." are no evidence); a text shorter than `N` tokens is one gram, the
  whole text, matched as an exact normalised token run;
- an item matches one agent text (one file, one trajectory step) when at least `ITEM_SHARE` of its
  distinctive grams occur in that text; an item with no distinctive gram is *indistinct* (counted,
  never matched);
- a submission counts the items matched in what existed when it was submitted (snapshots and
  driver steps up to its snapshot, its own files); the run is **flagged** when a submission's
  matched share of all held-out + final items reaches `RUN_THRESHOLD`.

One pass: the items become one table of hashed grams, and every distinct snapshot blob is read
once through the snapshot repository's single `git cat-file --batch` process.
"""

from __future__ import annotations

import json
import math
import re
import time
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2c.contracts.run_paths import RunPaths

from .record import RunRecord, parse_time, sid
from .snapshots import SnapshotRepo

N = 8                   # tokens per n-gram
ITEM_SHARE = 0.5        # share of an item's distinctive grams one text must hold
RUN_THRESHOLD = 0.01    # matched share of held-out + final items that flags a run
MAX_TEXT_BYTES = 4_000_000
MAX_DISK_FILE = 64_000_000      # a data file left on disk (jsonl, csv, arrow) read up to this
MAX_DISK_TOTAL = 512_000_000    # ... and this much over all of them
SKIP_DIRS = {".git", "__pycache__", "node_modules", ".venv", "venv", "site-packages", ".triton",
             "hf_cache", ".cache"}
RAW_SUFFIXES = (".arrow",)      # binary containers whose strings are stored raw: read anyway
MAX_WHERE = 3           # locations kept per matched item
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt", ".npy", ".npz",
                   ".h5", ".msgpack", ".onnx", ".pkl")
PROMPT_KEYS = ("prompt", "question", "instruction", "input", "problem")   # the first one present
_PUNCT = re.compile(r"[\W_]+", re.UNICODE)


def normalise(text: str) -> str:
    """NFKC, lowercase, punctuation to spaces, whitespace collapsed."""
    return " ".join(_PUNCT.sub(" ", unicodedata.normalize("NFKC", text).lower()).split())


def tokens(text: str) -> list[str]:
    return normalise(text).split()


def grams(toks: list[str], lengths: Iterable[int]) -> set[int]:
    """Hashes of every run of each length in `lengths` (hash() of a tuple: stable in a process)."""
    out: set[int] = set()
    for length in lengths:
        for i in range(len(toks) - length + 1):
            out.add(hash(tuple(toks[i:i + length])))
    return out


def item_texts(item: dict[str, Any]) -> list[str]:
    """The texts of one item that can identify it: its prompt, its answer when long enough."""
    texts = []
    prompt = next((item[k] for k in PROMPT_KEYS if isinstance(item.get(k), str)), None)
    if prompt and prompt.strip():
        texts.append(prompt)
    answer = item.get("answer")
    if isinstance(answer, str) and len(tokens(answer)) >= N:
        texts.append(answer)
    return texts


@dataclass
class ItemIndex:
    """The held-out items as one table of hashed grams: gram -> the item texts holding it."""

    n: int = N
    share: float = ITEM_SHARE
    table: dict[int, list[int]] = field(default_factory=dict)
    needed: list[int] = field(default_factory=list)      # per item text: grams to match
    owner: list[str] = field(default_factory=list)       # per item text: the item's id
    lengths: set[int] = field(default_factory=set)
    indistinct: list[str] = field(default_factory=list)

    @classmethod
    def build(cls, items: list[tuple[str, list[str]]], allowed: Iterable[str] = (),
              n: int = N, share: float = ITEM_SHARE) -> ItemIndex:
        """`items`: (id, texts); `allowed`: texts whose grams are no evidence (the agent split)."""
        index = cls(n=n, share=share)
        toks = [(item_id, [tokens(t) for t in texts]) for item_id, texts in items]
        index.lengths = {n} | {len(t) for _, ts in toks for t in ts if 0 < len(t) < n}
        common: set[int] = set()
        for text in allowed:
            common |= grams(tokens(text), index.lengths)
        for item_id, texts in toks:
            usable = 0
            for t in texts:
                own = grams(t, [n] if len(t) >= n else [len(t)]) - common
                if not own:
                    continue
                usable += 1
                slot = len(index.needed)
                index.needed.append(max(1, math.ceil(share * len(own))))
                index.owner.append(item_id)
                for g in own:
                    index.table.setdefault(g, []).append(slot)
            if not usable:
                index.indistinct.append(item_id)
        return index

    def match(self, text: str) -> set[str]:
        """The ids of the items this one text matches."""
        if not self.table:
            return set()
        toks = tokens(text)
        counts: dict[int, int] = {}
        for g in grams(toks, self.lengths) & self.table.keys():
            for slot in self.table[g]:
                counts[slot] = counts.get(slot, 0) + 1
        return {self.owner[s] for s, c in counts.items() if c >= self.needed[s]}


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def load_items(paths: RunPaths) -> dict[str, list[dict[str, Any]]]:
    """{split: items} of the held-out and final files the run's grader holds."""
    return {split: _read_jsonl(path) for split, path in
            (("heldout", paths.heldout), ("final", paths.final_heldout)) if path.is_file()}


def agent_split_texts(paths: RunPaths) -> Iterator[str]:
    """Every string value of the agent split's records (RUN/data/*.jsonl)."""
    for file in sorted(paths.data.glob("*.jsonl")) if paths.data.is_dir() else []:
        for record in _read_jsonl(file):
            for value in record.values():
                if isinstance(value, str):
                    yield value


def _decode(raw: bytes, limit: int = MAX_TEXT_BYTES, raw_ok: bool = False) -> str | None:
    if len(raw) > limit or (b"\0" in raw[:8192] and not raw_ok):
        return None
    return raw.decode("utf-8", "replace")


def blob_text(raw: bytes) -> str | None:
    """The text the check reads of a snapshot file, or None for one it does not read (binary: a
    NUL in its first 8 KiB; or over MAX_TEXT_BYTES). The public export's snapshot bundle keeps
    only the files this reads (analysis/export.py): what the check never read is never shared."""
    return _decode(raw)


def disk_texts(paths: RunPaths, stats: dict[str, int]
               ) -> Iterator[tuple[float | None, dict[str, Any], str]]:
    """(mtime, where, text) of the files left on disk that snapshots never take — the data files
    (*.jsonl, *.csv, ... are excluded from snapshots by rule: runtime/snapshots.py) — in the final
    workspace (output/ aside) and the agent's /tmp and HOME."""
    budget = MAX_DISK_TOTAL
    for kind, top in (("workspace", paths.workspace), ("outside:tmp", paths.agent_tmp),
                      ("outside:home", paths.agent_home)):
        if not top.is_dir():
            continue
        for file in sorted(top.rglob("*")):
            rel = file.relative_to(top)
            if (kind == "workspace" and rel.parts[0] == "output") or SKIP_DIRS & set(rel.parts) \
                    or file.is_symlink() or not file.is_file():
                continue
            suffix = file.suffix.lower()
            size = file.stat().st_size
            if suffix in WEIGHT_SUFFIXES or size > min(MAX_DISK_FILE, budget):
                stats["disk_skipped"] += int(suffix not in WEIGHT_SUFFIXES)
                continue
            text = _decode(file.read_bytes(), MAX_DISK_FILE, suffix in RAW_SUFFIXES)
            if text is None:
                continue
            budget -= size
            stats["disk_files"] += 1
            yield file.stat().st_mtime, {"kind": kind.split(":")[0], "path": (
                f"{kind.split(':')[1]}/" if ":" in kind else "") + rel.as_posix()}, text


def snapshot_texts(repo: SnapshotRepo, snapshots: list[dict[str, Any]], stats: dict[str, int]
                   ) -> Iterator[tuple[float | None, dict[str, Any], str]]:
    """(time, where, text) of each distinct blob, at the first snapshot that holds it."""
    seen: set[str] = set()
    for snap in snapshots:
        for path, blob in sorted(repo.files(snap["commit"]).items()):
            if blob in seen:
                continue
            seen.add(blob)
            obj = repo.read(blob)
            text = blob_text(obj[2]) if obj and obj[1] == "blob" else None
            if text is None:
                stats["skipped"] += 1
                continue
            stats["scanned"] += 1
            yield snap["ts"], {"kind": "snapshot", "commit": snap["commit"], "path": path}, text


def submission_texts(paths: RunPaths, stats: dict[str, int]
                     ) -> Iterator[tuple[str, dict[str, Any], str]]:
    """(submission id, where, text) of every non-weight file of the kept submission copies."""
    folder = paths.grader / "submissions"
    for sub in sorted(folder.iterdir()) if folder.is_dir() else []:
        for file in sorted(p for p in sub.rglob("*") if p.is_file()):
            if file.suffix.lower() in WEIGHT_SUFFIXES or file.stat().st_size > MAX_TEXT_BYTES:
                continue
            text = _decode(file.read_bytes())
            if text is None:
                continue
            stats["submission_files"] += 1
            yield sub.name, {"kind": "submission", "submission": sub.name,
                             "path": str(file.relative_to(sub))}, text


def trajectory_texts(root: Path, stats: dict[str, int]
                     ) -> Iterator[tuple[float | None, dict[str, Any], str]]:
    """(time, where, text) of each driver answer: message, reasoning and tool-call arguments."""
    trajectory = None
    path = RunPaths(root).trajectory
    try:
        trajectory = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        try:
            from .trajectory import build_trajectory
            trajectory = build_trajectory(root)
        except Exception:  # noqa: BLE001 - a run without a gateway record has no trajectory
            trajectory = None
    steps = (trajectory or {}).get("steps") or []
    stats["trajectory"] = int(bool(steps))
    for step in steps:
        if not isinstance(step, dict) or step.get("source") != "agent":
            continue
        parts = [step.get("message") or "", step.get("reasoning_content") or ""]
        parts += [json.dumps(c.get("arguments"), ensure_ascii=False)
                  for c in step.get("tool_calls") or [] if isinstance(c, dict)]
        stats["trajectory_steps"] += 1
        yield (parse_time(step.get("timestamp")), {"kind": "trajectory",
                                                   "step": step.get("step_id")}, "\n".join(parts))


@dataclass
class _Hit:
    when: float | None
    where: dict[str, Any]
    items: set[str]
    submission: str | None = None     # set for a submission's own files


def _bound(record: RunRecord, sub: Any) -> float | None:
    """What existed when `sub` was submitted: up to its snapshot's time, else its arrival."""
    times = [s["ts"] for s in record.snapshots if s["commit"] == sub.snapshot and s["ts"]]
    return times[0] if times else sub.received_at


def _summary(hits: list[_Hit], splits: dict[str, str], total: int) -> dict[str, Any]:
    where: dict[str, list[dict[str, Any]]] = {}
    for hit in hits:
        for item in sorted(hit.items):
            locations = where.setdefault(item, [])
            if len(locations) < MAX_WHERE:
                locations.append(hit.where)
    matched = sorted(where)
    return {"matched": [{"id": i, "split": splits.get(i), "where": where[i]} for i in matched],
            "count": len(matched), "share": round(len(matched) / total, 4) if total else 0.0}


def contamination_section(record: RunRecord) -> dict[str, Any]:
    """report.json's `contamination` section (schema: analysis/schemas/report.schema.json)."""
    started = time.perf_counter()
    paths = RunPaths(record.root)
    items = load_items(paths)
    splits = {str(it.get("id")): split for split, rows in items.items() for it in rows}
    total = len(splits)
    index = ItemIndex.build([(str(it.get("id")), item_texts(it))
                             for rows in items.values() for it in rows], agent_split_texts(paths))
    stats = {"scanned": 0, "skipped": 0, "submission_files": 0, "trajectory": 0,
             "trajectory_steps": 0, "disk_files": 0, "disk_skipped": 0}
    hits: list[_Hit] = []
    repo = SnapshotRepo(paths.snapshots)
    try:
        if index.table:
            for when, where, text in snapshot_texts(repo, record.snapshots, stats):
                if found := index.match(text):
                    hits.append(_Hit(when, where, found))
    finally:
        repo.close()
    if index.table:
        for when, where, text in disk_texts(paths, stats):
            if found := index.match(text):
                hits.append(_Hit(when, where, found))
        for when, where, text in trajectory_texts(record.root, stats):
            if found := index.match(text):
                hits.append(_Hit(when, where, found))
        for sub_id, where, text in submission_texts(paths, stats):
            if found := index.match(text):
                hits.append(_Hit(None, where, found, submission=sub_id))
    pruned = sorted({sid((e.get("data") or {}).get("id")) for e in record.events_of(
        "submission_pruned")})
    submissions = []
    for sub in record.submissions:
        bound = _bound(record, sub)
        mine = [h for h in hits if h.submission == sub.id]
        mine += [h for h in hits if h.submission is None
                 and (bound is None or h.when is None or h.when <= bound)]
        submissions.append({"id": sub.id, **_summary(mine, splits, total),
                            "files_pruned": sub.id in pruned})
    run = _summary(hits, splits, total)
    # The run, not only its submissions: a file's time on disk is its last write, which the agent
    # controls, so what it left anywhere counts against the run.
    flagged = run["count"] > 0 and run["share"] >= RUN_THRESHOLD
    return {
        "method": {"n": N, "item_share": ITEM_SHARE, "run_threshold": RUN_THRESHOLD,
                   "normalisation": "NFKC, lowercase, punctuation to spaces, whitespace collapsed",
                   "excluded": "n-grams that occur in the agent split (RUN/data)"},
        "item_counts": {split: len(rows) for split, rows in items.items()} | {
            "indistinct": len(index.indistinct)},
        "n_items": total,
        "sources": {"snapshots": len(record.snapshots), "blobs_scanned": stats["scanned"],
                    "blobs_skipped": stats["skipped"],
                    "trajectory": bool(stats["trajectory"]),
                    "trajectory_steps": stats["trajectory_steps"],
                    "submission_files": stats["submission_files"],
                    "disk_files": stats["disk_files"], "disk_skipped": stats["disk_skipped"],
                    "submissions_pruned": pruned},
        "available": total > 0,
        "flagged": bool(flagged),
        "run": run,
        "submissions": submissions,
        "elapsed_s": round(time.perf_counter() - started, 3),
    }


def check_run(run_dir: str | Path) -> dict[str, Any]:
    return contamination_section(RunRecord.load(run_dir))
