"""The values a Python file's names and arguments hold, as far as the source alone says: literals,
module constants, names assigned from a literal or from a call with a literal default
(`lr = env_float("LR", 5e-5)`), parameters with literal defaults. An expression is not a value
(what ran may differ: the run's hyperparameters.json says what ran), so it is `Unresolved`.
Used by the training-method detection (analysis/training_methods.py) for hyperparameters.
"""

from __future__ import annotations

import ast
from typing import Any


def name_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


class Unresolved(Exception):
    pass


def value_of(node: ast.AST, source: str, constants: dict[str, Any]) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    if isinstance(node, ast.Name):
        if node.id in constants:
            return constants[node.id]
        raise Unresolved(node.id)  # a bare variable name says nothing
    # an expression (`float(os.environ.get("SFT_LR", "5e-5"))`) is not the value that ran: no
    # source text as a value (the run's hyperparameters.json says what ran, attribution.py)
    raise Unresolved(ast.get_source_segment(source, node) or "")


def jsonable(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, (str, int, float, bool))
                                                for v in value):
        return list(value)
    return repr(value)[:80]


def _literal(node: ast.AST) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None


def constants_of(tree: ast.Module) -> dict[str, Any]:
    """The values names hold: module-level literals first; then names assigned anywhere from a
    literal, from a call with a literal default (`lr = env_float("LR", 5e-5)`), or function
    parameters with literal defaults."""
    constants: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            ok, value = _literal(node.value)
            if ok:
                constants[node.targets[0].id] = value
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and node.targets[0].id not in constants:
            value = node.value
            if isinstance(value, ast.Call):
                callee = (name_of(value.func) or "").lower()
                if "env" not in callee and callee not in ("get", "getattr"):
                    continue
                literals = [a.value for a in value.args if isinstance(a, ast.Constant)
                            and isinstance(a.value, (int, float)) and not isinstance(a.value, bool)]
                if literals:
                    constants[node.targets[0].id] = literals[-1]
                continue
            ok, literal = _literal(value)
            if ok:
                constants[node.targets[0].id] = literal
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args.posonlyargs + node.args.args
            for arg, default in zip(args[len(args) - len(node.args.defaults):],
                                    node.args.defaults):
                if arg.arg not in constants and isinstance(default, ast.Constant):
                    constants[arg.arg] = default.value
    return constants
