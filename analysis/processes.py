"""What ran, from the host-side process record (a2c.contracts.process_record): the evidence the
route and mode compliance are judged on when a run has one.

Every process of the agent is read with the code it ran: kept scripts, inline code, modules,
standard input, imported local modules and start-up files (analysed by ``training_methods`` as
Python when an interpreter ran them as Python, whatever their name), the TRL command line in its
argv, an installed `-m` module's source on this machine (``launched.py``); a fork runs its
parent's code. A submission is attributed to the processes seen writing its folder before it was
received (`writer`); when none was seen, or they train nothing (a copy), to every process that
ran training code before it (`ran`). Code that never ran counts for nothing; a path a script
mentions is no evidence.

**Gaps** (compliance's "cannot be established"), from every process started before the
submission: Python code that ran and is not kept (gone before the recorder saw it, over the cap,
unreadable), code changed after its process started, a program read from a pipe no parent's
code shows, code run that cannot be followed (exec, eval, importlib, runpy, ...), a compiled
program or library of the agent's (not a copy of an installed one), an installed `-m` module
this machine lacks, an interpreter prompt or kernel (`-m code`, `ipykernel`: code handed to it
at run time), an import neither the agent's nor installed (a folder added to sys.path at run
time), training-like code whose method is not recognised, a loop or trainer subclass whose
method is not established; a writer running an installed module that trains nothing readable;
with writers known, a disallowed method run in another process before (the submitted model may
start from it); and a record missing, altered, or said incomplete by its recorder.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2c.contracts.process_record import (
    ENTRY_TYPES,
    CodeSeen,
    ProcessEnded,
    ProcessEntry,
    ProcessSeen,
    RecorderStarted,
    RecorderStopped,
    WriteSeen,
    read_process_record,
    verify_record,
)

from .installed import installed_copy, installed_module
from .launched import _a2c_imports, _analyse_module, _module_source
from .training_methods import FileTraining, analyse_file

MAX_TEXT = 8_000_000
_TRL_CLI = {"sft": "SFT", "dpo": "DPO", "grpo": "GRPO", "kto": "KTO", "orpo": "ORPO",
            "ppo": "PPO", "rloo": "RLOO", "online_dpo": "Online DPO", "reward": "Reward model"}
_HEREDOC = re.compile(r"\b(?:python|pypy)[\w.]*\b[^\n<]*<<-?\s*(['\"]?)(\w+)\1[^\n]*\n")
COPY_PROGRAMS = {"cp", "mv", "rsync", "tar", "install", "ln", "dd", "cat", "tee", "scp"}
# installed modules that run code handed to them at run time
REPLS = {"ipykernel", "ipykernel_launcher", "jupyter", "jupyter_console", "IPython", "code",
         "pdb", "bpython", "ptpython", "xonsh", "rpyc", "debugpy", "pydevd", "idlelib"}


@dataclass
class Ran:
    """One process of the agent (all its program images) and what its code says."""

    pid: int
    start: float
    ppid: int = 0
    argv: list[str] = field(default_factory=list)
    exe: str | None = None
    end: float | None = None
    images: list[ProcessSeen] = field(default_factory=list)
    code: list[CodeSeen] = field(default_factory=list)
    writes: list[WriteSeen] = field(default_factory=list)
    analysed: list[FileTraining] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)
    library: bool = False         # its program is an installed module (`-m`), not the agent's

    @property
    def name(self) -> str:
        return f"pid {self.pid}: {' '.join(self.argv)[:120]}"

    @property
    def methods(self) -> list[str]:
        return sorted({m for c in self.analysed for m in c.methods})

    @property
    def trains(self) -> bool:
        return bool(self.methods)

    @property
    def copies(self) -> bool:
        return posixpath.basename(self.exe or (self.argv[:1] or [""])[0]) in COPY_PROGRAMS


class ProcessEvidence:
    """The record read and every process analysed (`load`)."""

    def __init__(self, root: Path, entries: list[dict[str, Any]], problems: list[str]):
        self.root = root
        self.problems = list(problems)
        self.views: dict[str, str] = {}
        self.procs: dict[tuple[int, float], Ran] = {}
        self._texts: dict[str, str | None] = {}
        sessions: dict[int, bool] = {}
        for entry in (_typed(e) for e in entries):
            if isinstance(entry, RecorderStarted):
                sessions[int(entry.session or 0)] = False
                self.views.update(entry.views or {})
            elif isinstance(entry, RecorderStopped):
                sessions[int(entry.session or 0)] = True
                self.problems += [f"the process recorder: {p}" for p in entry.problems or []]
            elif entry is not None:
                self._add(entry)
        self.problems += [f"the process recorder's session {n} did not stop (the runtime ended "
                          "without closing its record)" for n, ok in sessions.items() if not ok]
        for proc in sorted(self.procs.values(), key=lambda p: p.start):
            parent = self._parent(proc) if proc.images and proc.images[0].forked else None
            if parent is not None:      # a fork of its parent: the parent's program
                proc.analysed, proc.library = list(parent.analysed), parent.library
            self._analyse(proc)

    def _add(self, entry: ProcessEntry) -> None:
        """One entry about a process: the process keyed by (pid, start)."""
        key = (int(getattr(entry, "pid", 0) or 0), float(getattr(entry, "start", 0.0) or 0.0))
        proc = self.procs.setdefault(key, Ran(pid=key[0], start=key[1]))
        if isinstance(entry, ProcessSeen):
            proc.images.append(entry)
            proc.argv, proc.exe = list(entry.argv or []), entry.exe
            proc.ppid = int(entry.ppid or 0)
        elif isinstance(entry, CodeSeen):
            proc.code.append(entry)
        elif isinstance(entry, WriteSeen):
            proc.writes.append(entry)
        elif isinstance(entry, ProcessEnded):
            proc.end = entry.gone or entry.last_seen

    # ------------------------------------------------------------------ reading code
    def text(self, entry: CodeSeen) -> str | None:
        rel = entry.file
        if not rel or not entry.captured:
            return None
        if rel not in self._texts:
            path = self.root / rel
            try:
                data = path.read_bytes()[:MAX_TEXT] if path.is_file() else None
            except OSError:
                data = None
            self._texts[rel] = None if data is None else data.decode("utf-8", "replace")
        return self._texts[rel]

    def _analyse(self, proc: Ran) -> None:
        for entry in proc.code:
            language, how = entry.language, entry.how
            where = entry.path or entry.module or f"{how} of pid {proc.pid}"
            agent = entry.agent_place is not False   # the agent's (or inline) code
            if language == "binary":
                if not installed_copy(where, entry.sha256, entry.segments):
                    proc.gaps.append(f"{where} ({proc.name}): {entry.why or 'binary'}")
                continue
            if language != "python":
                continue      # a shell's own text is no evidence: the processes it ran are
            text = self.text(entry)
            if text is None:
                self._not_kept(proc, entry, where, agent)
                continue
            if entry.changed_after_start:
                proc.gaps.append(f"{where} changed after {proc.name} started: what ran may not "
                                 "be what was kept")
            code = analyse_file(where + ".py", text)
            code.path = where
            for item in code.evidence:
                item.file = where
            proc.analysed.append(code)
            if agent:
                proc.gaps += [f"{d} ({proc.name}) runs code the analysis cannot follow"
                              for d in code.dynamic[:3]]
                if code.training_like and not code.trains:
                    proc.gaps.append(f"{where} ({proc.name}) looks like training (a backward "
                                     "pass, an optimizer) but no method the analysis knows")
            proc.gaps += code.ambiguous
        proc.analysed += self._trl_cli(proc)

    def _not_kept(self, proc: Ran, entry: CodeSeen, where: str, agent: bool) -> None:
        how, language = entry.how, entry.language
        if language != "python":
            return        # a shell's children are recorded themselves
        if how == "import" and not entry.path:
            module = entry.module or ""
            if not installed_module(module):
                proc.gaps.append(f"{entry.by or where} imports {module} ({proc.name}): "
                                 "neither the agent's files nor this machine have it (a folder "
                                 "added at run time?)")
            return
        if how == "module" and not entry.file:
            module = entry.module or ""
            proc.library = True
            if module.split(".")[0] in REPLS:
                proc.gaps.append(f"python -m {module} ({proc.name}) runs code it receives at "
                                 "run time (a kernel, a prompt): what it ran cannot be read")
                return
            if module.split(".")[0] == "a2c":
                proc.analysed += self._library(module, with_a2c_imports=True)
                return
            if _module_source(module) is not None:
                proc.analysed += self._library(module)
                return
            proc.gaps.append(f"python -m {module} ({proc.name}): no such module on this machine "
                             "and the record does not hold it")
            return
        if how == "stdin":
            bodies = self._heredocs(proc)
            if bodies:
                for i, body in enumerate(bodies):
                    code = analyse_file(f"stdin of pid {proc.pid} ({i}).py", body)
                    proc.analysed.append(code)
                    proc.gaps += [f"{d} (stdin of {proc.name}) runs code the analysis cannot "
                                  "follow" for d in code.dynamic[:3]]
                return
        if not agent:
            return        # a program of this machine (read-only in the sandbox)
        proc.gaps.append(f"{where} ran ({proc.name}) and the record does not hold it: "
                         f"{entry.why or 'not kept'}")

    def _library(self, module: str, with_a2c_imports: bool = False) -> list[FileTraining]:
        loaded = _module_source(module)
        if loaded is None:
            return []
        out = [_analyse_module(module, loaded[1])]
        if with_a2c_imports:
            for dep in _a2c_imports(loaded[1])[:10]:
                if (dep_src := _module_source(dep)) is not None:
                    out.append(_analyse_module(dep, dep_src[1]))
        return out

    def _heredocs(self, proc: Ran) -> list[str]:
        """The bodies of heredocs fed to python in the shell code of this process's earlier
        images and of its parent and grandparent (recorded, not the agent's log)."""
        keys = [(proc.pid, proc.start)]
        parent = self._parent(proc)
        for _ in range(2):
            if parent is None:
                break
            keys.append((parent.pid, parent.start))
            parent = self._parent(parent)
        bodies: list[str] = []
        for key in keys:
            for entry in self.procs[key].code:
                if entry.language == "shell" and (text := self.text(entry)):
                    for match in _HEREDOC.finditer(text):
                        rest = text[match.end():]
                        end = re.search(rf"^\s*{re.escape(match.group(2))}\s*$", rest, re.M)
                        bodies.append(rest[:end.start()] if end else rest)
        return bodies

    def _parent(self, proc: Ran) -> Ran | None:
        found = [p for p in self.procs.values() if p.pid == proc.ppid and p.start <= proc.start]
        return max(found, key=lambda p: p.start) if found else None

    def _trl_cli(self, proc: Ran) -> list[FileTraining]:
        out = []
        for image in proc.images:
            argv = image.argv or []
            for i, arg in enumerate(argv[:-1]):
                if posixpath.basename(arg) == "trl" and argv[i + 1] in _TRL_CLI:
                    code = analyse_file("argv.sh", f"trl {argv[i + 1]}")
                    code.path = f"argv of pid {proc.pid}: trl {argv[i + 1]}"
                    out.append(code)
        return out

    # ------------------------------------------------------------------ submissions
    def _relative(self, path: str | None) -> str | None:
        if path is None:
            return None
        path = path.rstrip("/")
        for key in ("output", "output_host"):
            view = (self.views.get(key) or "").rstrip("/")
            if view and (path == view or path.startswith(view + "/")):
                return path[len(view):].lstrip("/")
        for prefix in ("/workspace/output", "output", "./output"):
            if path == prefix or path.startswith(prefix + "/"):
                return path[len(prefix):].lstrip("/")
        return None

    def writers(self, model_path: str | None, received: float | None) -> list[Ran]:
        want = self._relative(model_path)
        if want is None:
            return []
        out = []
        for proc in self.procs.values():
            for write in proc.writes:
                rel = self._relative(write.path)
                if rel is not None and (not want or rel == want or rel.startswith(want + "/")) \
                        and (received is None or float(write.at or 0) <= received):
                    out.append(proc)
                    break
        return out

    def for_submission(self, received: float | None, model_path: str | None,
                       allowed: set[str] | None, family: dict[str, str]
                       ) -> tuple[list[FileTraining], str, list[str], list[str]]:
        """(the code attributed, how: writer | ran | none, the gaps, the writers' names).
        `allowed`: the mode's families (None: no constraint), `family`: method -> family."""
        before = [p for p in self.procs.values() if received is None or p.start <= received]
        training = [p for p in before if p.trains]
        writers = [p for p in self.writers(model_path, received) if p.trains]
        chosen, how = (writers, "writer") if writers else (training, "ran" if training else
                                                           "none")
        gaps = list(self.problems)
        for proc in before:
            gaps += [g for g in proc.gaps if g not in gaps]
        for proc in self.writers(model_path, received):
            if proc.library and not proc.trains and not proc.copies:
                gaps.append(f"{proc.name} wrote the submitted folder running an installed "
                            "module that trains nothing the analysis can read")
        if how == "writer" and allowed is not None:
            for proc in training:
                bad = [m for m in proc.methods if family.get(m, "other") not in allowed]
                if proc not in chosen and bad:
                    gaps.append(f"{', '.join(bad)} ran before this submission ({proc.name}); "
                                "the record does not show that the submitted model does not "
                                "start from it")
        code = [c for p in chosen for c in p.analysed if c.trains]
        return code, how, gaps, [p.name for p in writers]

    def runs(self, limit: int = 50) -> list[dict[str, Any]]:
        """The processes that ran Python (or a compiled program of the agent's), for the
        report: what, when, which code, kept or not, its methods."""
        out = []
        for proc in sorted(self.procs.values(), key=lambda p: p.start):
            code = [c for c in proc.code if c.language in ("python", "binary")]
            if not code and not proc.writes:
                continue
            out.append({"pid": proc.pid, "start": proc.start, "argv": proc.argv[:8],
                        "code": [{"path": c.path or c.module or c.how,
                                  "how": c.how, "captured": bool(c.captured)}
                                 for c in code[:8]],
                        "methods": proc.methods, "wrote_output": bool(proc.writes),
                        "gaps": proc.gaps[:3]})
            if len(out) >= limit:
                break
        return out


def _typed(entry: dict[str, Any]) -> ProcessEntry | None:
    """A line of logs/processes.jsonl as its entry class (read_process_record keeps only the
    kinds ENTRY_TYPES knows)."""
    cls = ENTRY_TYPES.get(entry.get("kind"))  # type: ignore[arg-type]
    return cls.from_dict(entry) if cls else None


def load(root: str | Path, events: list[dict[str, Any]]) -> ProcessEvidence | None:
    """The run's process evidence; None for a run recorded without a process recorder (no
    record and no `process_record` event)."""
    root = Path(root)
    entries, problems = read_process_record(root)
    marked = any(e.get("type") == "process_record" for e in events)
    if not entries and not marked:
        return None
    problems += verify_record(root, events)
    if not entries:
        problems.append("the process record holds nothing")
    return ProcessEvidence(root, entries, problems)
