"""What the contamination check (analysis/contamination.py) catches, what it wrongly flags, and
what it costs next to a run's grading.

Three tables:

1. **Planted sets, per transform** (issue 32): 20 held-out items hidden in an SFT file among the
   agent split, under each transform an adversary used (verbatim, base64, hex, URL-encoded,
   reversed, reworded / paraphrased, compact `A+B=C`, case/spacing/punctuation, numbers formatted
   `1,000`), for arith (the task spec's generator, held-out split drawn with a held-out seed) and
   GSM8K-style word problems (tests/fixtures/contamination/); caught / planted per transform, and
   the items matched that were not planted.
2. **Honest data**: the agent split alone, shuffled and written as agents write it (raw, SFT text,
   chat messages, Q/A, `a+b=c`, CSV): items matched per file (a numeric coincidence in a small item
   space) and files whose matches would count toward a flag (must be 0).
3. **Runs**: for each run directory given (or found under --runs-dir; by default two fixture runs
   built with the arith splits), `check_run` timed (best of --repeat) next to the check as it was
   at --before (a git revision; default: before analysis/normalize.py was added) and next to the
   run's grading time (the `elapsed_s` of submission_scored, baseline_scored and final_scored),
   with what the check found (flagged, matched / counted / items).

    .venv/bin/python benchmarks/bench_contamination.py [RUN_DIR...] [--runs-dir DIR]
        [--repeat 3] [--seeds 3] [--before REV|none] [--skip-planted]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from a2c.analysis import contamination
from a2c.analysis.contamination import ItemIndex, check_run
from a2c.analysis.leaderboard import find_runs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "contamination"))
import planted  # noqa: E402

GRADING_EVENTS = ("submission_scored", "baseline_scored", "final_scored")


def grading_seconds(run_dir: Path) -> float:
    total = 0.0
    for line in (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("type") in GRADING_EVENTS:
            elapsed = (event.get("data") or {}).get("elapsed_s")
            total += float(elapsed) if isinstance(elapsed, (int, float)) else 0.0
    return total


def before_module(rev: str) -> ModuleType | None:
    """analysis/contamination.py as it was at `rev`, loaded inside the a2c.analysis package."""
    if rev == "none":
        return None
    if rev == "auto":
        added = subprocess.run(["git", "-C", str(ROOT), "log", "--format=%H", "--diff-filter=A",
                                "--", "analysis/normalize.py"], capture_output=True, text=True)
        first = added.stdout.split()
        rev = f"{first[-1]}~1" if first else "HEAD"
    short = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", rev],
                           capture_output=True, text=True).stdout.strip() or rev
    src = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:analysis/contamination.py"],
                         capture_output=True, text=True)
    if src.returncode:
        print(f"(no 'before' timing: git show {rev} failed)")
        return None
    spec = importlib.util.spec_from_loader("a2c.analysis._contamination_before", loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "a2c.analysis"
    sys.modules[spec.name] = module
    exec(compile(src.stdout, f"contamination.py@{rev}", "exec"), module.__dict__)  # noqa: S102
    module.REV = short
    return module


def index_for(held: list[dict], agent: list[dict]) -> ItemIndex:
    """The index contamination_section builds: the agent split's values and its file."""
    values = [v for r in agent for v in r.values() if isinstance(v, str)]
    return ItemIndex.from_items(held, values + ["\n".join(json.dumps(r) for r in agent)])


def planted_table(seeds: int) -> bool:
    ok = True
    print(f"Planted sets: {planted.PLANTED} held-out items per file among the agent split, "
          f"{seeds} files per transform")
    print(f"{'task':14} {'transform':18} {'caught':>12} {'rate':>7} {'not planted':>12}")
    cases = [("arith", *planted.arith_splits(7), None),
             ("arith (seed)", *planted.arith_splits(None), None)]
    held, agent, para = planted.word_splits()
    cases.append(("word problems", held, agent, para))
    for name, held, agent, para in cases:
        index = index_for(held, agent)
        table = planted.measure(index, held, agent, "arith" if name.startswith("arith")
                                else "words", para, range(seeds))
        for transform, row in table.items():
            rate = row["caught"] / row["planted"]
            ok &= rate >= 0.9
            print(f"{name:14} {transform:18} {row['caught']:>5}/{row['planted']:<6} "
                  f"{100 * rate:6.1f}% {row['false']:>12}")
    return ok


def honest_table(seeds: int) -> bool:
    ok = True
    print(f"\nHonest data: the agent split alone, {seeds} shuffles per style")
    print(f"{'task':14} {'style':10} {'matched/file':>13} {'max':>5} {'counted files':>14}")
    cases = [("arith", *planted.arith_splits(7), "arith"),
             ("arith (seed)", *planted.arith_splits(None), "arith")]
    held, agent, _ = planted.word_splits()
    cases.append(("word problems", held, agent, "words"))
    for name, held, agent, task in cases:
        index = index_for(held, agent)
        for style in planted.HONEST_STYLES[task]:
            counts, counted = [], 0
            for seed in range(seeds):
                text = "\n".join(planted.honest_lines(agent, random.Random(seed), style))
                found = index.match_detail(text)
                counts.append(len(found))
                signed = [i for i, (by, _) in found.items() if by != "ngrams"]
                counted += int(len(found) > len(signed) or
                               len(signed) >= contamination.SIGNATURE_MIN_ITEMS)
            ok &= counted == 0
            print(f"{name:14} {style:10} {sum(counts) / len(counts):13.2f} {max(counts):5} "
                  f"{counted:>14}")
    return ok


def fixture_runs(folder: Path) -> list[Path]:
    """Two fixture runs (6 and 60 submissions) holding arith's held-out and agent splits, the
    agent's own SFT copy of its split in the workspace: honest runs."""
    spec = importlib.util.spec_from_file_location(
        "a2c_make_fixture_run", ROOT / "tests" / "fixtures" / "runs" / "make_fixture_run.py")
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)
    held, agent = planted.arith_splits(7)
    runs = []
    for n in (6, 60):
        run = maker.make_run(folder / f"fixture-n{n}", n=n)
        (run / "grader" / "heldout.jsonl").write_text(
            "".join(json.dumps(it) + "\n" for it in held), encoding="utf-8")
        (run / "data" / "train.jsonl").write_text(
            "".join(json.dumps(it) + "\n" for it in agent), encoding="utf-8")
        (run / "workspace" / "sft.jsonl").write_text(
            "\n".join(planted.honest_lines(agent, random.Random(n), "text")) + "\n")
        runs.append(run)
    return runs


def time_runs(runs: list[Path], repeat: int, before: ModuleType | None) -> None:
    label = f"before ({before.REV[:12]}) s" if before else ""
    print(f"\n{'run':46} {'check s':>8} {label:>20} {'grading s':>10} {'ratio':>7}  flagged "
          "matched/counted/items")
    for run in runs:
        times, section = [], None
        for _ in range(max(1, repeat)):
            start = time.perf_counter()
            section = check_run(run)
            times.append(time.perf_counter() - start)
        old = ""
        if before:
            old_times = []
            for _ in range(max(1, repeat)):
                start = time.perf_counter()
                before.check_run(run)
                old_times.append(time.perf_counter() - start)
            old = f"{min(old_times):.3f}"
        check, grading = min(times), grading_seconds(run)
        ratio = f"{100 * check / grading:6.2f}%" if grading else "    n/a"
        run_part = section["run"]
        print(f"{run.name[:46]:46} {check:8.3f} {old:>20} {grading:10.1f} {ratio}  "
              f"{str(section['flagged']):7} {run_part['count']}/{run_part.get('counted', '-')}"
              f"/{section['n_items']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path)
    parser.add_argument("--runs-dir", type=Path, action="append", default=[])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--before", default="auto",
                        help="git revision of the check to time against ('none': skip)")
    parser.add_argument("--skip-planted", action="store_true")
    args = parser.parse_args()
    ok = True
    if not args.skip_planted:
        ok &= planted_table(args.seeds)
        ok &= honest_table(args.seeds)
    runs = list(args.runs) + [r for d in args.runs_dir for r in find_runs(d)]
    with tempfile.TemporaryDirectory(prefix="a2c-bench-contamination-") as tmp:
        if not runs:
            runs = fixture_runs(Path(tmp))
        time_runs(runs, args.repeat, before_module(args.before))
    if not ok:
        print("\nbelow 90 % on a transform, or an honest file counted: see above")
        sys.exit(1)


if __name__ == "__main__":
    main()
