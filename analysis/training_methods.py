"""Training-method detection: which post-training methods (and hyperparameters) a file of the
agent's code uses, read from the code it wrote (never from what it says).

For every file of a snapshot we find its methods and key hyperparameters:

* Python files are parsed with ``ast``: calls (and, more weakly, imports) of TRL trainers and
  configs (``SFTTrainer`` -> SFT, ``GRPOTrainer`` -> GRPO, ``DPOTrainer`` -> DPO, ...), the plain
  ``transformers.Trainer`` (supervised fine-tuning), hand-written loops (``loss.backward()``,
  read by the data flow of their loss: ``loss_flow.py``; a name is no evidence), and reward-filtered
  fine-tuning (RFT: sampling + filtering by reward/correctness + supervised training, or explicit
  rejection-sampling / expert-iteration code);
* files that do not parse (and shell scripts) fall back to regular expressions.

Hyperparameters are keyword arguments of calls, module-level constants, ``argparse`` defaults and
dict entries whose names are known (``learning_rate``/``lr``, epochs, steps, batch size, LoRA rank,
``beta``, ``num_generations`` ...); names are resolved through module constants when possible.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from .loss_flow import loop_methods, python_notes, word_loops
from .source_values import Unresolved, constants_of, jsonable, name_of, value_of
from .trainers import GENERIC_TRAINERS, TRAINER_METHODS
from .values import clip

# An RL trainer fed by the agent's own environment episodes (TRL's multi-turn routes: a
# `rollout_func` that plays the environment, or an `environment_factory`): online RL, level 3's
# hardest route. The GRPO evidence of such a file is named ONLINE_GRPO.
ONLINE_KWARGS = ("rollout_func", "environment_factory")
ONLINE_GRPO = "GRPO (online rollouts)"
_ONLINE_REGEX = re.compile(r"\b(?:" + "|".join(ONLINE_KWARGS) + r")\s*=")

HP_NAMES = {
    "learning_rate": "learning_rate", "lr": "learning_rate",
    "num_train_epochs": "epochs", "epochs": "epochs", "num_epochs": "epochs", "n_epochs": "epochs",
    "max_steps": "max_steps", "num_steps": "max_steps", "steps": "max_steps",
    "total_steps": "max_steps", "train_steps": "max_steps",
    "per_device_train_batch_size": "batch_size", "batch_size": "batch_size",
    "train_batch_size": "batch_size", "bs": "batch_size",
    "gradient_accumulation_steps": "grad_accum",
    "lora_r": "lora_rank", "lora_rank": "lora_rank", "rank": "lora_rank",
    "lora_alpha": "lora_alpha",
    "beta": "beta", "kl_coef": "beta", "init_kl_coef": "beta",
    "num_generations": "num_generations", "num_samples": "num_generations",
    "max_seq_length": "max_length", "max_length": "max_length",
    "max_completion_length": "max_completion_length",
    "warmup_ratio": "warmup_ratio", "weight_decay": "weight_decay",
    "lr_scheduler_type": "lr_scheduler",
}
SHORT_NAMES = ("steps", "rank", "bs")   # too common to count as a hyperparameter by name alone

_REGEX_TRAINERS = re.compile(r"\b(" + "|".join(sorted(TRAINER_METHODS, key=len, reverse=True))
                             + r")\b")
_REGEX_HP = re.compile(r"(?<![\w.])(?:--)?(" + "|".join(sorted(HP_NAMES, key=len, reverse=True))
                       + r")[\"']?\s*[=:]\s*[\"']?([-+\w.]+)")
_RFT_WORDS = re.compile(r"rejection[_ ]?sampl|expert[_ ]?iteration|best[_ -]?of[_ -]?n|"
                        r"\brft\b|reward[_ ]?filter|self[_ -]?distill|\bstar\b", re.IGNORECASE)
_FILTER_WORDS = re.compile(r"correct|reward|is_right|accept|verif|filter|match", re.IGNORECASE)
_SAMPLING = re.compile(r"\.generate\(|\bLLM\(|SamplingParams|\.sample\(|do_sample\s*=\s*True")
_TRAINING = re.compile(r"Trainer\(|\.backward\(|\.train\(")
_LORA = re.compile(r"\bLoraConfig\b|get_peft_model|\bpeft\b")
_QLORA = re.compile(r"load_in_4bit|BitsAndBytesConfig")

CODE_SUFFIXES = (".py", ".sh", ".bash", ".ipynb", ".yaml", ".yml", ".toml", ".cfg")


@dataclass
class Evidence:
    method: str
    file: str
    line: int
    kind: str     # call | import | regex | heuristic
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "file": self.file, "line": self.line, "kind": self.kind,
                "text": self.text}


@dataclass
class Hyperparameter:
    name: str
    value: Any
    file: str
    line: int
    source: str   # the original name in the code

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "file": self.file, "line": self.line,
                "source": self.source}


@dataclass
class FileTraining:
    path: str
    evidence: list[Evidence] = field(default_factory=list)
    hyperparameters: list[Hyperparameter] = field(default_factory=list)
    adapters: list[str] = field(default_factory=list)
    parsed: bool = True
    strings: set[str] = field(default_factory=set)
    ambiguous: list[str] = field(default_factory=list)  # why its method is not established
    dynamic: list[str] = field(default_factory=list)    # code it runs that cannot be followed
    training_like: bool = False                         # a backward pass, an optimizer, ...

    @property
    def methods(self) -> list[str]:
        strong = {e.method for e in self.evidence if e.kind != "import"}
        if not strong:
            strong = {e.method for e in self.evidence}
        return sorted(strong)

    @property
    def trains(self) -> bool:
        return bool(self.methods)


def _line_text(lines: list[str], lineno: int) -> str:
    if 1 <= lineno <= len(lines):
        text = lines[lineno - 1].strip()
        return clip(text, 160)
    return ""


def _add_hp(found: FileTraining, key: str, node: ast.AST, source: str, constants: dict[str, Any],
            path: str, line: int, name: str) -> None:
    try:
        value = jsonable(value_of(node, source, constants))
    except Unresolved:
        return
    found.hyperparameters.append(Hyperparameter(key, value, path, line, name))


@dataclass
class _Reading:
    """One Python file being read: what was found so far, and what the reading needs."""

    found: FileTraining
    source: str
    lines: list[str]
    constants: dict[str, Any]
    imported: dict[str, int] = field(default_factory=dict)
    seen_calls: set[tuple[str, int]] = field(default_factory=set)

    def hp(self, key: str, node: ast.AST, line: int, name: str) -> None:
        _add_hp(self.found, key, node, self.source, self.constants, self.found.path, line, name)

    def call(self, node: ast.Call) -> None:
        """A trainer constructed, a LoRA config, and hyperparameters passed by keyword."""
        found = self.found
        name = name_of(node.func)
        if name in TRAINER_METHODS or (name in GENERIC_TRAINERS and (
                name in self.imported or isinstance(node.func, ast.Attribute))):
            method = TRAINER_METHODS.get(name) or GENERIC_TRAINERS[name]
            if (method, node.lineno) not in self.seen_calls:
                self.seen_calls.add((method, node.lineno))
                found.evidence.append(Evidence(method, found.path, node.lineno, "call",
                                               _line_text(self.lines, node.lineno)))
        if name and name.endswith("LoraConfig") and "LoRA" not in found.adapters:
            found.adapters.append("LoRA")
        for kw in node.keywords:
            if kw.arg is None:
                continue
            key = HP_NAMES.get(kw.arg)
            if kw.arg == "r" and name and name.endswith("LoraConfig"):
                key = "lora_rank"
            if kw.arg == "default" and name == "add_argument" and node.args:
                flag = node.args[0]
                if isinstance(flag, ast.Constant) and isinstance(flag.value, str):
                    key = HP_NAMES.get(flag.value.lstrip("-").replace("-", "_"))
                    if key:
                        self.hp(key, kw.value, node.lineno, flag.value)
                continue
            if key:
                self.hp(key, kw.value, node.lineno, kw.arg)

    def dict_literal(self, node: ast.Dict) -> None:
        for k, v in zip(node.keys, node.values):
            if isinstance(k, ast.Constant) and isinstance(k.value, str) and \
                    k.value in HP_NAMES and k.value not in SHORT_NAMES:
                self.hp(HP_NAMES[k.value], v, k.lineno, k.value)

    def module_assignments(self, tree: ast.Module) -> None:
        """Hyperparameters set at module level (`LR = 5e-5`)."""
        for node in tree.body:
            if not isinstance(node, (ast.Assign, ast.AnnAssign)):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if not isinstance(target, ast.Name) or node.value is None:
                    continue
                key = HP_NAMES.get(target.id.lower())
                if not key or target.id.lower() in SHORT_NAMES:
                    continue
                if target.id in self.constants:
                    self.found.hyperparameters.append(Hyperparameter(
                        key, jsonable(self.constants[target.id]), self.found.path,
                        node.lineno, target.id))
                else:
                    self.hp(key, node.value, node.lineno, target.id)

    def imports_not_called(self) -> None:
        """A trainer imported and never constructed here: weaker evidence, still named."""
        called = {e.method for e in self.found.evidence}
        for name, lineno in self.imported.items():
            method = TRAINER_METHODS.get(name) or GENERIC_TRAINERS[name]
            if method not in called:
                self.found.evidence.append(Evidence(method, self.found.path, lineno, "import",
                                                    _line_text(self.lines, lineno)))


def _analyse_python(path: str, source: str) -> FileTraining:
    found = FileTraining(path)
    lines = source.splitlines()
    tree = ast.parse(source)
    reading = _Reading(found, source, lines, constants_of(tree))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name in TRAINER_METHODS or alias.name in GENERIC_TRAINERS:
                    reading.imported.setdefault(alias.name, node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                len(node.value) < 300:
            found.strings.add(node.value)
        elif isinstance(node, ast.Call):
            reading.call(node)
        elif isinstance(node, ast.Dict):
            reading.dict_literal(node)
    reading.module_assignments(tree)
    reading.imports_not_called()
    if any(isinstance(node, ast.Call) and name_of(node.func) == "GRPOTrainer" and
           any(kw.arg in ONLINE_KWARGS for kw in node.keywords) for node in ast.walk(tree)):
        _mark_online(found)
    _heuristics(found, _without_docstrings(tree, source), lines, tree)
    found.dynamic, found.training_like = python_notes(tree, source, found.ambiguous, path)
    return found


def _without_docstrings(tree: ast.AST, source: str) -> str:
    """The source with its docstrings blanked (lines kept): the word heuristics read what the
    code does and its comments, not the prose of its documentation (a shipped example script
    whose usage text mentions rejection sampling is not reward-filtered training)."""
    lines = source.splitlines(keepends=True)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            first = body[0] if body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and \
                    isinstance(first.value.value, str) and first.end_lineno:
                for i in range(first.lineno - 1, first.end_lineno):
                    lines[i] = "\n"
    return "".join(lines)


def _mark_online(found: FileTraining) -> None:
    """The file's GRPO trains on its own environment episodes: name its GRPO evidence so."""
    for item in found.evidence:
        if item.method == "GRPO":
            item.method = ONLINE_GRPO


def _first_line(pattern: re.Pattern, source: str) -> int:
    match = pattern.search(source)
    return source.count("\n", 0, match.start()) + 1 if match else 1


def _heuristics(found: FileTraining, source: str, lines: list[str],
                tree: ast.AST | None = None) -> None:
    # hand-written loops: by the data flow of their loss, or by words in a file that does not
    # parse (loss_flow.py)
    loops = loop_methods(tree, source, found.path) if tree is not None else \
        word_loops(source, any(e.kind != "import" for e in found.evidence))
    for lineno, method, note in loops:
        found.evidence.append(Evidence(method, found.path, lineno, "heuristic",
                                       _line_text(lines, lineno)))
        found.ambiguous += [note] if note else []
    methods = {e.method for e in found.evidence if e.kind != "import"}
    rft_word = _RFT_WORDS.search(source)
    supervised = bool(methods & {"SFT"})
    if rft_word or (supervised and _SAMPLING.search(source) and _FILTER_WORDS.search(source)):
        lineno = _first_line(_RFT_WORDS if rft_word else _SAMPLING, source)
        if rft_word or supervised:
            found.evidence.append(Evidence("RFT", found.path, lineno, "heuristic",
                                           _line_text(lines, lineno)))
    if _QLORA.search(source) and "QLoRA" not in found.adapters:
        found.adapters.append("QLoRA")
    if _LORA.search(source) and "LoRA" not in found.adapters:
        found.adapters.append("LoRA")


_TRL_CLI = re.compile(r"\btrl\s+(sft|dpo|grpo|kto|orpo|ppo|rloo|online_dpo)\b")
_TRL_CLI_METHODS = {"sft": "SFT", "dpo": "DPO", "grpo": "GRPO", "kto": "KTO", "orpo": "ORPO",
                    "ppo": "PPO", "rloo": "RLOO", "online_dpo": "Online DPO"}


def _analyse_text(path: str, source: str) -> FileTraining:
    found = FileTraining(path, parsed=False)
    lines = source.splitlines()
    for lineno, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith("#") and not path.endswith((".yaml", ".yml")):
            continue
        for match in _TRL_CLI.finditer(line):
            found.evidence.append(Evidence(_TRL_CLI_METHODS[match.group(1)], path, lineno,
                                           "regex", _line_text(lines, lineno)))
        for match in _REGEX_TRAINERS.finditer(line):
            found.evidence.append(Evidence(TRAINER_METHODS[match.group(1)], path, lineno,
                                           "regex", _line_text(lines, lineno)))
        for match in _REGEX_HP.finditer(line):
            name = match.group(1)
            if name in SHORT_NAMES:
                continue
            raw = match.group(2)
            value: Any = raw
            try:
                value = int(raw)
            except ValueError:
                try:
                    value = float(raw)
                except ValueError:
                    pass
            found.hyperparameters.append(Hyperparameter(HP_NAMES[name], value, path, lineno,
                                                        name))
    for match in re.finditer(r"['\"]([^'\"\n]{1,200})['\"]", source):
        found.strings.add(match.group(1))
    for token in re.findall(r"[\w./-]*output[\w./-]*", source):
        found.strings.add(token)
    if _ONLINE_REGEX.search(source):
        _mark_online(found)
    _heuristics(found, source, lines)
    return found


def analyse_file(path: str, source: str) -> FileTraining:
    if path.endswith(".py"):
        try:
            return _analyse_python(path, source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass
    return _analyse_text(path, source)


def is_code(path: str) -> bool:
    return path.endswith(CODE_SUFFIXES) and not path.endswith(("package.json", "lock.json"))
