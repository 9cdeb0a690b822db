"""Hand-written training loops: what the loss handed to `.backward()` depends on.

A loop that names `log_probs`, `advantages` and `reward` is not thereby policy gradient: an
adversary wrote plain supervised fine-tuning that way (`advantages = torch.ones_like(logp)`)
and was reported as RL. So each `X.backward()` (and `accelerator.backward(X)`,
`torch.autograd.backward(X)`) is traced back through the assignments of its file, scope by
scope (function parameters through the calls that pass them, `buf.append(v)` as an assignment
to `buf`, local functions through their returns), and read as

* **policy gradient** when the loss depends on the model's own samples (`.generate(`,
  `multinomial`, a distribution's `.sample()`, or a local function that calls one) other than
  only through a reward, *and* on a reward (a call or a name saying reward, advantage, return,
  score, ...) that itself depends on those samples;
* **supervised** when the trace reaches a likelihood computed in the file (a model output's
  `.loss` or `.logits`, `log_softmax`, `cross_entropy`, `labels=`, ...) without that: data in,
  likelihood out, whatever the names say;
* **not established** when no likelihood can be traced in the file (a loss computed in another
  module): the caller says so, and compliance calls that a gap.

The data flow is read from names and calls in one file; code written to defeat it (a sample
that flows into the loss for nothing, names built at run time) can still mislead it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from .trainers import GENERIC_TRAINERS, TRAINER_METHODS

REWARD = re.compile(r"reward|advantage|return|score|correct|verif|judge|preference",
                    re.IGNORECASE)
SAMPLING_CALLS = {"generate", "multinomial"}
DISTRIBUTIONS = {"Categorical", "Multinomial", "Bernoulli", "OneHotCategorical",
                 "RelaxedCategorical"}
COLLECTS = {"append", "extend", "add", "insert", "appendleft", "put"}
MAX_DEPTH = 60
# a likelihood computed in the file: a model output's loss or logits, a log-probability
LIKELIHOOD_ATTRS = {"loss", "logits", "log_probs", "logprobs", "log_prob"}
LIKELIHOOD_CALLS = {"log_softmax", "cross_entropy", "nll_loss", "CrossEntropyLoss", "NLLLoss",
                    "logsigmoid", "log_prob", "gather", "mse_loss", "kl_div", "log", "logsumexp",
                    "binary_cross_entropy", "binary_cross_entropy_with_logits"}


@dataclass
class Flags:
    direct_sample: bool = False
    any_sample: bool = False
    reward_on_sample: bool = False
    likelihood: bool = False

    def merge(self, other: Flags) -> None:
        self.direct_sample |= other.direct_sample
        self.any_sample |= other.any_sample
        self.reward_on_sample |= other.reward_on_sample
        self.likelihood |= other.likelihood


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _callee(node: ast.Call) -> str | None:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else \
        func.id if isinstance(func, ast.Name) else None


def _is_sampling(node: ast.Call) -> bool:
    name = _callee(node)
    if name in SAMPLING_CALLS or name == "SamplingParams":
        return True
    if name in ("sample", "rsample") and isinstance(node.func, ast.Attribute):
        receiver = node.func.value
        if isinstance(receiver, ast.Call) and _callee(receiver) in DISTRIBUTIONS:
            return True
        text = (_dotted(receiver) or "").lower()
        return any(w in text for w in ("dist", "categorical", "policy", "pi"))
    return False


class Flow:
    """The assignments of one module, by scope, and the tracer over them."""

    def __init__(self, tree: ast.AST):
        self.defs: dict[int, dict[str, list[tuple[ast.AST, int]]]] = {}
        self.parent: dict[int, int | None] = {0: None}
        self.funcs: dict[str, ast.AST] = {}
        self.returns: dict[int, list[ast.AST]] = {}
        self.scope_of: dict[int, int] = {}
        self.samplers: set[str] = set()
        self._collect(tree, 0)
        self._params(tree)
        self._find_samplers()
        self.memo: dict[tuple, Flags] = {}

    # ------------------------------------------------------------------ collecting
    def _add(self, scope: int, target: ast.AST, value: ast.AST, value_scope: int) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._add(scope, elt, value, value_scope)
            return
        if isinstance(target, ast.Starred):
            return self._add(scope, target.value, value, value_scope)
        if isinstance(target, ast.Subscript):
            target = target.value
        name = _dotted(target)
        if name:
            self.defs.setdefault(scope, {}).setdefault(name, []).append((value, value_scope))
            if name.split(".")[0] in ("self", "cls") and scope != 0:   # seen by every method
                self.defs.setdefault(0, {}).setdefault(name, []).append((value, value_scope))

    def _collect(self, node: ast.AST, scope: int) -> None:
        for child in ast.iter_child_nodes(node):
            self.scope_of[id(child)] = scope
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                inner = id(child)
                self.parent[inner] = scope
                if not isinstance(child, ast.Lambda):
                    self.funcs[child.name] = child
                else:
                    self.returns.setdefault(inner, []).append(child.body)
                self._collect(child, inner)
                continue
            if isinstance(child, ast.Assign):
                for target in child.targets:
                    self._add(scope, target, child.value, scope)
            elif isinstance(child, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)) and \
                    child.value is not None:
                self._add(scope, child.target, child.value, scope)
            elif isinstance(child, (ast.For, ast.AsyncFor, ast.comprehension)):
                self._add(scope, child.target, child.iter, scope)
            elif isinstance(child, ast.withitem) and child.optional_vars is not None:
                self._add(scope, child.optional_vars, child.context_expr, scope)
            elif isinstance(child, ast.Return) and child.value is not None:
                self.returns.setdefault(scope, []).append(child.value)
            elif isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) and \
                    child.func.attr in COLLECTS and child.args:
                for arg in child.args:
                    self._add(scope, child.func.value, arg, scope)
            self._collect(child, scope)

    def _params(self, tree: ast.AST) -> None:
        """A local function's parameters take the arguments of the calls that pass them."""
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = self.funcs.get(_callee(node) or "")
            if func is None or isinstance(func, ast.Lambda):
                continue
            params = [a.arg for a in func.args.posonlyargs + func.args.args]
            if params and params[0] in ("self", "cls") and isinstance(node.func, ast.Attribute):
                params = params[1:]
            caller = self.scope_of.get(id(node), 0)
            for name, arg in zip(params, node.args):
                self.defs.setdefault(id(func), {}).setdefault(name, []).append((arg, caller))
            for kw in node.keywords:
                if kw.arg:
                    self.defs.setdefault(id(func), {}).setdefault(kw.arg, []).append(
                        (kw.value, caller))

    def _find_samplers(self) -> None:
        changed = True
        while changed:
            changed = False
            for name, func in self.funcs.items():
                if name in self.samplers:
                    continue
                for node in ast.walk(func):
                    if isinstance(node, ast.Call) and (_is_sampling(node) or
                                                       _callee(node) in self.samplers):
                        self.samplers.add(name)
                        changed = True
                        break

    # ------------------------------------------------------------------ tracing
    def _lookup(self, name: str, scope: int | None) -> list[tuple[ast.AST, int]]:
        candidates = [name] + ([name.split(".")[0]] if "." in name else [])
        while scope is not None:
            for candidate in candidates:
                found = self.defs.get(scope, {}).get(candidate)
                if found:
                    return found
            scope = self.parent.get(scope)
        return []

    def trace(self, node: ast.AST, scope: int, in_reward: bool = False,
              depth: int = 0) -> Flags:
        key = (id(node), scope, in_reward)
        if key in self.memo:
            return self.memo[key]
        flags = Flags()
        self.memo[key] = flags          # a cycle reads what is known so far
        if depth > MAX_DEPTH:
            return flags
        if isinstance(node, ast.Attribute) and node.attr in LIKELIHOOD_ATTRS:
            flags.likelihood = True
        if isinstance(node, ast.Call):
            name = _callee(node) or ""
            rewardish = bool(REWARD.search(name))
            flags.likelihood |= name in LIKELIHOOD_CALLS or any(kw.arg == "labels"
                                                                for kw in node.keywords)
            if _is_sampling(node) or name in self.samplers:
                flags.any_sample = True
                flags.direct_sample |= not in_reward
            func = self.funcs.get(name)
            if func is not None:
                for ret in self.returns.get(id(func), []):
                    flags.merge(self._reward(ret, id(func), in_reward, rewardish, depth))
            children = [node.func.value] if isinstance(node.func, ast.Attribute) else []
            children += list(node.args) + [kw.value for kw in node.keywords]
            for child in children:
                flags.merge(self._reward(child, scope, in_reward, rewardish, depth))
            return flags
        name = _dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if name is not None:
            rewardish = bool(REWARD.search(name.split(".")[-1]))
            defs = self._lookup(name, scope)
            for value, value_scope in defs:
                flags.merge(self._reward(value, value_scope, in_reward, rewardish, depth))
            return flags
        for child in ast.iter_child_nodes(node):
            flags.merge(self.trace(child, scope, in_reward, depth + 1))
        return flags

    def _reward(self, node: ast.AST, scope: int, in_reward: bool, rewardish: bool,
                depth: int) -> Flags:
        inner = self.trace(node, scope, in_reward or rewardish, depth + 1)
        if rewardish and inner.any_sample:
            inner = Flags(inner.direct_sample, inner.any_sample, True, inner.likelihood)
        return inner


def backward_losses(tree: ast.AST) -> list[tuple[int, ast.AST, int]]:
    """(line, the differentiated expression, its scope) of every backward call."""
    flow_scopes: dict[int, int] = {}

    def walk(node: ast.AST, scope: int) -> None:
        for child in ast.iter_child_nodes(node):
            inner = id(child) if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                    ast.Lambda)) else scope
            flow_scopes[id(child)] = scope
            walk(child, inner)
    walk(tree, 0)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute) or \
                node.func.attr != "backward":
            continue
        scope = flow_scopes.get(id(node), 0)
        if node.args:                         # accelerator.backward(loss)
            out.append((node.lineno, node.args[0], scope))
        else:                                 # loss.backward()
            out.append((node.lineno, node.func.value, scope))
    return out


PG_WORDS = re.compile(r"log_?probs?|logprob|advantage|policy_loss|reinforce", re.IGNORECASE)
PG = "Policy gradient (custom)"


def loop_methods(tree: ast.AST, source: str, path: str) -> list[tuple[int, str, str | None]]:
    """(line, method, why it is not established or None) of each hand-written loop: policy
    gradient, supervised (SFT), or untraceable (named by its words, with a note)."""
    out = []
    for line, verdict in classify_loops(tree):
        if verdict == "pg":
            out.append((line, PG, None))
        elif verdict == "supervised":
            out.append((line, "SFT", None))
        else:
            words = PG_WORDS.search(source) and REWARD.search(source)
            out.append((line, PG if words else "SFT",
                        f"{path}:{line}: a hand-written loop whose loss cannot be traced in this "
                        "file: its method is not established"))
    return out


def word_loops(source: str, trainer_called: bool) -> list[tuple[int, str, str | None]]:
    """A file that does not parse: its first backward call by the words around it, when no
    trainer is called."""
    match = re.search(r"\.backward\(", source)
    if not match or trainer_called:
        return []
    line = source.count("\n", 0, match.start()) + 1
    words = PG_WORDS.search(source) and re.search(r"reward|advantage|return", source, re.I)
    return [(line, PG if words else "SFT", None)]


def classify_loops(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, "pg" | "supervised" | "unknown") for each backward call of the module."""
    losses = backward_losses(tree)
    if not losses:
        return []
    flow = Flow(tree)
    out = []
    for line, expr, scope in losses:
        flags = flow.trace(expr, scope)
        if flags.direct_sample and flags.reward_on_sample:
            out.append((line, "pg"))
        elif flags.likelihood:
            out.append((line, "supervised"))
        else:
            out.append((line, "unknown"))
    return out


DYNAMIC_NAMES = {"exec", "eval", "compile", "__import__", "execfile"}
DYNAMIC_ATTRS = {"import_module", "run_path", "run_module", "exec_module", "load_module",
                 "FunctionType", "CodeType"}
TRAINING_LIKE = re.compile(r"\.backward\(|autograd\.(?:grad|backward)\b|\.zero_grad\(|"
                           r"\btorch\.optim\b|\boptim\.[A-Z]\w*\(|\boptax\b|\bjax\.grad\b|"
                           r"value_and_grad|deepspeed\.initialize|Trainer\(|\btorch\.func\b|"
                           r"functional_call")
OVERRIDES = {"compute_loss", "training_step", "_compute_loss", "get_batch_loss_metrics",
             "_generate_and_score_completions", "compute_loss_func", "loss_function"}


def python_notes(tree: ast.AST, source: str, ambiguous: list[str], path: str
                 ) -> tuple[list[str], bool]:
    """(dynamic, training_like) of a Python file, its ambiguities added to `ambiguous`: where it
    runs code the analysis
    cannot follow (exec, eval, compile, __import__, importlib, runpy, a code object built), where
    a trainer's name does not establish its method (a subclass of a TRL trainer that overrides
    its loss or step), and whether it looks like training at all (a backward pass, an
    optimizer, a trainer)."""
    trainers = set(TRAINER_METHODS) | set(GENERIC_TRAINERS)
    dynamic: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in DYNAMIC_NAMES or \
                    isinstance(func, ast.Attribute) and func.attr in DYNAMIC_ATTRS:
                dynamic.append(f"{path}:{node.lineno}: {_callee(node)}(...)")
        elif isinstance(node, ast.ClassDef):
            bases = {_dotted(b) or "" for b in node.bases}
            bases = {b.split(".")[-1] for b in bases} & trainers
            overrides = sorted(f.name for f in node.body
                               if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                               and f.name in OVERRIDES)
            if bases and overrides:
                ambiguous.append(f"{path}:{node.lineno}: class {node.name}({', '.join(sorted(bases))})"
                                 f" overrides {', '.join(overrides)}: the trainer's name does not "
                                 "establish its method")
    return dynamic[:10], bool(TRAINING_LIKE.search(source))
