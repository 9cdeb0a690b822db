"""Which upstream serves a run's driver, resolved on the host before the run starts.

`prepare_gateway(paths, driver, agent, budget)` turns the driver string (`provider/model` or
`scripted:NAME`) into driver/gateway.json (upstream URL, the *name* of the key variable, wires,
the pinned model and the explicit list of ids a request may name, budget, the price entry) and a fresh per-run key in driver/gateway.key. The
provider key itself is only ever read by the gateway process from its environment, so nothing
the run writes holds it.

Providers come from, later winning: the built-ins, the drivers file ($A2C_DRIVERS_FILE, else
~/.config/a2c/drivers.yaml, validated against drivers.schema.json), then variables
A2C_DRIVER_<PROVIDER>_BASE_URL / _KEY_ENV / _WIRES. Every refusal is one RunError line that
names the fix.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from a2c.contracts.budget import Budget
from a2c.contracts.driver_server import ServerPlan, VllmSettings
from a2c.contracts.parts import Part
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.spec import AgentSpec, DriverSpec
from a2c.errors import RunError
from a2c.fsutil import write_bytes_atomic, write_json_atomic
from a2c.paths import SPECS_DIR, config_dir, project_root
from a2c.settings import get_path
from a2c.wires import PROVIDER_WIRES, VLLM_WIRES, WIRES

from .prices import pinned_models, price_for

SCHEMA_FILE = Path(__file__).with_name("drivers.schema.json")
CONFIG_VERSION = 1
DEFAULT_TIMEOUT_S = 600.0
DEFAULT_CONNECT_TIMEOUT_S = 10.0

# The wires each provider serves: the wire package's one table (the compiler checks suites by it).
BUILTIN_PROVIDERS: dict[str, dict[str, Any]] = {
    "anthropic": {"base_url": "https://api.anthropic.com", "key_env": "ANTHROPIC_API_KEY",
                  "wires": list(PROVIDER_WIRES["anthropic"])},
    "openai": {"base_url": "https://api.openai.com", "key_env": "OPENAI_API_KEY",
               "wires": list(PROVIDER_WIRES["openai"])},
    "gemini": {"base_url": "https://generativelanguage.googleapis.com",
               "key_env": "GEMINI_API_KEY", "wires": list(PROVIDER_WIRES["gemini"])},
}
WIRE_PROVIDER = {wire: provider for provider, wires in PROVIDER_WIRES.items() for wire in wires}
# `--driver vllm/MODEL`: a server a2c starts itself (runtime/run/driver_server.py) and the wires
# vLLM serves from one port; its URL is known only once it listens (gateway.json is updated then)
VLLM_PROVIDER = "vllm"


# ----------------------------------------------------------------------------- drivers file
def drivers_file() -> Path:
    return get_path("A2C_DRIVERS_FILE") or config_dir() / "drivers.yaml"


@lru_cache(maxsize=1)
def _validator():
    import jsonschema  # here, not at the top: the gateway process never validates
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def _node_at(node: yaml.Node | None, path: list) -> yaml.Node | None:
    """The YAML node at a JSON path (for line:column in messages)."""
    for part in path:
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and \
                part < len(node.value):
            node = node.value[part]
        else:
            return node
    return node


def _dotted(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top)"


def load_drivers_file(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """The drivers file's providers ({} when there is no file); SpecError-style RunError
    lines `FILE:LINE:COL: field: what` for a file that does not validate."""
    return _read_drivers_file(path).get("providers") or {}


def vllm_settings(path: Path | None = None) -> VllmSettings:
    """The drivers file's `vllm` section: how a2c starts the server of a `vllm/...` driver
    (executable, startup_timeout_s, args, per-model overrides; drivers.schema.json)."""
    return VllmSettings.from_dict(_read_drivers_file(path).get("vllm") or {})


def _read_drivers_file(path: Path | None = None) -> dict[str, Any]:
    path = path or drivers_file()
    if not path.is_file():
        if get_path("A2C_DRIVERS_FILE"):
            raise RunError(f"{path}: A2C_DRIVERS_FILE names a file that does not exist; "
                           "create it or unset the variable")
        return {}
    text = path.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text)
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise RunError(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    data = {} if data is None else data
    errors = list(_validator().iter_errors(data))
    if errors:
        found = []
        for err in errors:
            node = _node_at(root, list(err.absolute_path))
            line, col = (node.start_mark.line + 1, node.start_mark.column + 1) if node else (0, 0)
            found.append((line, col, f"{path}:{line}:{col}: {_dotted(err.absolute_path)}: "
                                     f"{err.message}"))
        raise RunError("\n".join(msg for _, _, msg in sorted(found)))
    return data


def _env_name(provider: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", provider).upper()


@dataclass(frozen=True)
class Provider(Part):
    """One upstream a `provider/model` driver names (drivers.schema.json `provider`), merged
    from the built-ins, the drivers file and the A2C_DRIVER_<PROVIDER>_* variables."""

    base_url: str = ""
    key_env: str | None = None
    wires: tuple[str, ...] = tuple(WIRES)
    allow_models: tuple[str, ...] = ()
    auth: str | None = None
    context: int | str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S


def providers() -> dict[str, Provider]:
    """Every provider this host knows: built-ins, the drivers file, A2C_DRIVER_* variables."""
    out = {name: dict(p) for name, p in BUILTIN_PROVIDERS.items()}
    for name, p in load_drivers_file().items():
        out[name] = {**out.get(name, {}), **p}
    names = set(out)
    for var in os.environ:
        m = re.match(r"^A2C_DRIVER_(.+)_(BASE_URL|KEY_ENV|WIRES)$", var)
        if m:
            names.add(next((n for n in out if _env_name(n) == m.group(1)), m.group(1).lower()))
    for name in names:
        prefix = f"A2C_DRIVER_{_env_name(name)}_"
        p = out.setdefault(name, {})
        if os.environ.get(prefix + "BASE_URL"):
            p["base_url"] = os.environ[prefix + "BASE_URL"]
        if prefix + "KEY_ENV" in os.environ:
            p["key_env"] = os.environ[prefix + "KEY_ENV"] or None
        if os.environ.get(prefix + "WIRES"):
            wires = [w.strip() for w in os.environ[prefix + "WIRES"].split(",") if w.strip()]
            bad = [w for w in wires if w not in WIRES]
            if bad:
                raise RunError(f"{prefix}WIRES: unknown wire {bad[0]!r}; use a comma list of "
                               f"{', '.join(WIRES)}")
            p["wires"] = wires
    if VLLM_PROVIDER in out:
        raise RunError(f"driver provider name {VLLM_PROVIDER!r} is reserved for the server a2c "
                       f"starts itself (--driver vllm/MODEL); rename it (e.g. local) in "
                       f"{drivers_file()} or in the A2C_DRIVER_VLLM_* variables")
    typed = {name: Provider.from_dict(p) for name, p in out.items()}
    for name, p in typed.items():
        if not p.base_url:
            raise RunError(f"driver provider {name!r} has no base URL; set "
                           f"A2C_DRIVER_{_env_name(name)}_BASE_URL or base_url in {drivers_file()}")
        if not re.match(r"^https?://[^/\s]+", p.base_url):
            raise RunError(f"driver provider {name!r}: base URL {p.base_url!r} is not an "
                           "http:// or https:// URL")
    return typed


# ----------------------------------------------------------------------------- scripted driver
def find_script(name: str) -> Path:
    """`scripted:NAME`: a path to a YAML script, or a shipped script specs/drivers/NAME.yaml."""
    cand = Path(name).expanduser()
    if ("/" in name or name.endswith((".yaml", ".yml"))) and cand.is_file():
        return cand.resolve()
    for folder in (SPECS_DIR / "drivers", project_root() / "specs" / "drivers"):
        for ext in (".yaml", ".yml"):
            if (folder / f"{name}{ext}").is_file():
                return (folder / f"{name}{ext}").resolve()
    raise RunError(f"scripted driver {name!r}: no script {name}.yaml in {SPECS_DIR / 'drivers'} "
                   "and no such file; use --driver scripted:NAME with a shipped script or a path")


# ----------------------------------------------------------------------------- prepare
def _agent_driver(agent: dict | AgentSpec | None) -> DriverSpec:
    spec = agent if isinstance(agent, AgentSpec) else AgentSpec.from_dict(agent or {})
    drv = spec.driver
    return drv if isinstance(drv, DriverSpec) else DriverSpec()


def agent_wires(agent: dict | AgentSpec | None) -> list[str]:
    """The wires the agent speaks, in order of preference (its spec's `driver.wire`: one wire or
    a list; the resolved agent carries both `wire` and `wires`)."""
    drv = _agent_driver(agent)
    wires = drv.wires or drv.wire
    return [] if not wires else [wires] if isinstance(wires, str) else list(wires)


def _strip_provider(model: str | None) -> str | None:
    return model.split("/", 1)[1] if model and "/" in model else model


def _budget(budget: dict | None) -> dict[str, Any]:
    """gateway.json's `budget`: the run's driver limits (a2c/contracts/budget.py), every one
    present, None for unlimited."""
    return Budget.from_dict(budget or {}).driver_limits()


def _resolve_vllm(driver: str, wires: list[str], server: ServerPlan | None) -> dict[str, Any]:
    """`vllm/MODEL`: the server a2c starts (its plan, from runtime/run/driver_server.py)."""
    if not server:
        raise RunError(f"--driver {driver}: a2c starts this server itself when it runs; use "
                       "`a2c run ... --driver vllm/MODEL` (or serve the model yourself and use "
                       "a local/ provider)")
    spoken = [w for w in wires if w in VLLM_WIRES]
    if wires and not spoken:
        raise RunError(f"--driver {driver}: the agent speaks {', '.join(wires)}; vLLM serves "
                       f"{', '.join(VLLM_WIRES)}; pick an agent that speaks one of them")
    return {"provider": VLLM_PROVIDER, "model": server.served_model_name,
            "wires": list(VLLM_WIRES), "agent_wire": spoken[0] if spoken else None,
            "allow_models": [], "upstream": {"base_url": None, "key_env": None, "auth": None,
                                             "context": "ask", "timeout_s": DEFAULT_TIMEOUT_S,
                                             "connect_timeout_s": DEFAULT_CONNECT_TIMEOUT_S},
            "scripted": None, "server": server.to_dict()}


def resolve_driver(driver: str, agent: dict | AgentSpec | None,
                   server: ServerPlan | None = None) -> dict[str, Any]:
    """The upstream part of gateway.json for a driver string (raises RunError). `server`: the
    plan of the vLLM server a2c starts for a `vllm/...` driver."""
    drv = _agent_driver(agent)
    wires = agent_wires(agent)
    wire = wires[0] if wires else None
    if not driver:
        raise RunError("no driver model given; pass --driver provider/model "
                       "(e.g. anthropic/claude-sonnet-4-5) or --driver scripted:NAME")
    if driver.startswith("scripted:"):
        name = driver.split(":", 1)[1]
        if not name:
            raise RunError("--driver scripted: needs a script name, e.g. scripted:sft-recipe")
        script = find_script(name)
        model = _strip_provider(drv.default)
        if not model:
            raise RunError(f"--driver {driver}: the agent names no default driver model to "
                           "impersonate; set driver.default in the agent spec")
        return {"provider": "scripted", "model": model, "wires": list(WIRES), "agent_wire": wire,
                "allow_models": [], "upstream": {"base_url": None, "key_env": None,
                                                 "auth": None,
                                                 "timeout_s": DEFAULT_TIMEOUT_S,
                                                 "connect_timeout_s": DEFAULT_CONNECT_TIMEOUT_S},
                "scripted": {"name": name, "script": str(script),
                             "sha256": hashlib.sha256(script.read_bytes()).hexdigest()}}
    if driver.startswith(VLLM_PROVIDER + "/"):
        return _resolve_vllm(driver, wires, server)
    if "/" in driver:
        provider, model = driver.split("/", 1)
    elif wire in WIRE_PROVIDER:
        provider, model = WIRE_PROVIDER[wire], driver
    else:
        raise RunError(f"--driver {driver!r}: write provider/model (e.g. "
                       "anthropic/claude-sonnet-4-5, openai/gpt-5-codex) or scripted:NAME")
    known = providers()
    if provider not in known:
        raise RunError(f"--driver {driver}: unknown provider {provider!r} (known: "
                       f"{', '.join(sorted(known))}); add it to {drivers_file()} or set "
                       f"A2C_DRIVER_{_env_name(provider)}_BASE_URL")
    p = known[provider]
    spoken = [w for w in wires if w in p.wires]
    if wires and not spoken:
        raise RunError(f"--driver {driver}: the agent speaks {', '.join(wires)}, provider "
                       f"{provider!r} serves {', '.join(p.wires)}; pick a provider that serves "
                       f"{wires[0]} or set A2C_DRIVER_{_env_name(provider)}_WIRES")
    key_env = p.key_env
    if key_env and not os.environ.get(key_env):
        raise RunError(f"--driver {driver}: ${key_env} is not set; export the provider key as "
                       f"{key_env} (it stays on the host: the agent gets a per-run gateway key)")
    return {"provider": provider, "model": model, "wires": list(p.wires),
            "agent_wire": spoken[0] if spoken else None,
            "allow_models": list(p.allow_models),
            "upstream": {"base_url": p.base_url.rstrip("/"), "key_env": key_env,
                         "auth": p.auth, "context": p.context,
                         "timeout_s": float(p.timeout_s),
                         "connect_timeout_s": float(p.connect_timeout_s)},
            "scripted": None}


def prepare_gateway(paths: RunPaths, driver: str, agent: dict | AgentSpec | None,
                    budget: dict | None, server: ServerPlan | None = None) -> dict[str, Any]:
    """Resolve the driver, write driver/gateway.json and driver/gateway.key (both 0600, in a
    0700 folder), and return the config. An existing key is kept (a resume keeps the agent's
    key valid). `server`: a `vllm/...` driver's server plan (its URL is set when it starts:
    `set_upstream_url`)."""
    resolved = resolve_driver(driver, agent, server)
    paths.driver.mkdir(parents=True, exist_ok=True)
    os.chmod(paths.driver, 0o700)
    if paths.driver_key.is_file() and paths.driver_key.read_text().strip():
        key = paths.driver_key.read_text().strip()
    else:
        key = "a2c-drv-" + secrets.token_urlsafe(32)
        write_bytes_atomic(paths.driver_key, key.encode() + b"\n", mode=0o600)
    price = price_for(resolved["model"])
    models = pinned_models(resolved["model"], resolved["allow_models"])
    config = {"version": CONFIG_VERSION, "driver": driver, **resolved, "models": models,
              "budget": _budget(budget), "price": price.to_dict() if price else None,
              "socket": str(paths.driver_socket)}
    write_json_atomic(paths.driver_config, config, mode=0o600)
    return config


def set_upstream_url(run_dir: str | Path, base_url: str) -> dict[str, Any]:
    """Point gateway.json's upstream at a server a2c started (its port is chosen at each
    start, a resume's too); the config written."""
    config = read_config(run_dir)
    config["upstream"]["base_url"] = base_url.rstrip("/")
    write_json_atomic(RunPaths(Path(run_dir)).driver_config, config, mode=0o600)
    return config


def read_config(run_dir: str | Path) -> dict[str, Any]:
    path = RunPaths(Path(run_dir)).driver_config
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunError(f"{path}: missing; call prepare_gateway first") from None


def read_key(run_dir: str | Path) -> str:
    return RunPaths(Path(run_dir)).driver_key.read_text(encoding="utf-8").strip()
