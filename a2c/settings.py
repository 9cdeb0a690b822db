"""Every `A2C_*` environment variable the project reads or sets, declared once, typed, read at call time.

Why one registry: the variables were read in some forty places, each with its own parsing (what
counts as "true", what a bad number does), some at import time, and the docs listed a third of
them. Here each has a name, a type, a default, who it is for and one line of doc; `get(name)` reads
`os.environ` when called (never at import) and turns a bad value into one `A2CError` line naming
the variable; `docs/settings.md` is generated from `SETTINGS` (`python -m a2c.settings_doc --write`,
a2c/settings_doc.py),
and `tests/test_settings.py` fails when that table is stale, when the source names a variable this
registry lacks, or when a registered variable is used nowhere.

Who a variable is for (`Audience`):
- `operator`: the host's configuration (caches, keys, endpoints, uids). The only kind an operator
  sets. Run and agent settings are spec fields or CLI flags, never new variables.
- `interface`: the runtime → agent interface: set by the runtime in the agent's sandbox, read by
  the agent, its scaffold or the workspace client.
- `internal`: a2c to its own child processes (the code-execution child, the evaluator, environment
  services, the bash hook), or a Dockerfile build argument; nobody sets them by hand.
- `test`: test and development switches (nox, the benchmarks, scripts/); not for a real run.
- `marker`: a literal that looks like a variable but is not one (a heredoc delimiter).

A `pattern` entry (`A2C_SERVICE_URL_<NAME>`) stands for a family of names; a `family` entry is read
through its prefix (the judge's `A2C_JUDGE_*` keys are looked up as prefix + key).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from a2c.errors import A2CError


class Audience(str, Enum):
    OPERATOR = "operator"
    INTERFACE = "interface"
    INTERNAL = "internal"
    TEST = "test"
    MARKER = "marker"


TYPES = ("str", "path", "url", "bool", "int", "float", "list")
TRUE, FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


@dataclass(frozen=True)
class Setting:
    """One variable. `default` is what an unset variable means (None: no value; a string in
    angle brackets describes a computed default and is never parsed). `where`: the module that
    reads or sets it (a template, a script) so the table says where to look."""

    name: str
    type: str
    default: object
    audience: Audience
    doc: str
    where: str
    family: str = ""          # read as prefix + key, never spelled whole in the source

    @property
    def is_pattern(self) -> bool:
        return "<" in self.name

    def regex(self) -> re.Pattern[str]:
        return re.compile("^" + re.sub(r"<[A-Z]+>", "[A-Z0-9_]+", self.name) + "$")

    @property
    def literal(self) -> str:
        """The part of the name the source must spell (for a pattern: up to the placeholder)."""
        return self.name.split("<", 1)[0]


OPS, IFC, N, T, M = (Audience.OPERATOR, Audience.INTERFACE, Audience.INTERNAL, Audience.TEST,
                     Audience.MARKER)
_JUDGE = "runtime/graders/judge_config.py"
_SBX = "runtime/sandbox/local.py, runtime/run/agent.py, templates/task/Dockerfile.j2"
_GW = "runtime/driver_gateway/process.py, runtime/run/agent.py"


def _s(name, type_, default, audience, doc, where, family=""):
    return Setting(name, type_, default, audience, doc, where, family)


SETTINGS: tuple[Setting, ...] = (
    # ------------------------------------------------------------------ operator: paths and caches
    _s("A2C_PROJECT_ROOT", "path", "<nearest parent with specs/>", OPS,
       "The checkout to work in (specs/, generated/, runs/).", "a2c/paths.py"),
    _s("A2C_CACHE", "path", "~/.cache/a2c", OPS,
       "Models, data, baselines and the installation's data key, prepared once and reused.",
       "a2c/paths.py"),
    _s("A2C_DATA_HOME", "path", None, OPS,
       "Where large external data lives (DeepSearchQA's frozen corpus); expanded in "
       "specs/tasks/deepsearchqa.yaml.", "runtime/envs/deepsearchqa/data.py"),
    _s("A2C_IMAGE_CACHE", "path", "~/.cache/a2c/images", OPS,
       "The docker backend's rootfs tarballs and wheelhouse.", "runtime/sandbox/docker_images.py"),
    _s("A2C_ENV_DATA_ROOT", "path", "<the held-out file's folder>", OPS,
       "Where a level-3 environment looks for the files its records name.",
       "runtime/envs/rollout_grader.py"),
    # ------------------------------------------------------------------ operator: keys
    _s("A2C_RECORD_SIGNING_KEY", "path", "<config dir>/record.ed25519", OPS,
       "The operator's Ed25519 key that signs run records.", "a2c/contracts/record_key.py"),
    _s("A2C_RECORD_KEY_FILE", "path", "<config dir>/record.key", OPS,
       "The legacy HMAC record key; when set, the signing key is looked for beside it.",
       "a2c/paths.py, a2c/contracts/record_key.py"),
    # ------------------------------------------------------------------ operator: network, mirrors
    _s("A2C_HUB_DOWNLOAD", "bool", False, OPS,
       "Let a2c download models and data sets from the Hugging Face hub (off: offline only).",
       "runtime/data/fetch.py"),
    _s("A2C_DATA_MIRROR", "url", None, OPS,
       "A base URL that serves the fetchable data archives by file name.", "runtime/data/fetch.py"),
    _s("A2C_DEBIAN_MIRROR", "url", "<deb.debian.org>", OPS,
       "The Debian mirror the docker backend's offline base image is built from.",
       "runtime/sandbox/docker_images.py"),
    _s("A2C_SEARXNG_URL", "url", None, OPS,
       "DeepSearchQA's SearxNG endpoint when a task's search engine (`backend`) is `searxng`.",
       "runtime/envs/deepsearchqa/search.py"),
    _s("A2C_WEBSHOP_URL", "url", "<the environment service's URL>", OPS,
       "A WebShop server to use instead of the task's environment service.",
       "runtime/envs/webshop/env.py"),
    # ------------------------------------------------------------------ operator: judge endpoint
    _s("A2C_JUDGE_CONFIG", "path", None, OPS,
       "A JSON/YAML file with the judge endpoint's keys (lower-case, no prefix).", _JUDGE),
    _s("A2C_JUDGE_BASE_URL", "url", None, OPS, "The judge's OpenAI-compatible endpoint.", _JUDGE),
    _s("A2C_JUDGE_API_KEY", "str", "", OPS, "The judge endpoint's key, if it needs one.", _JUDGE),
    _s("A2C_JUDGE_MODEL", "str", None, OPS, "The judge model's name at that endpoint.", _JUDGE),
    _s("A2C_JUDGE_PRICE_PROMPT_PER_1K", "float", 0.0, OPS,
       "Price per 1k prompt tokens, for the cost line.", _JUDGE),
    _s("A2C_JUDGE_PRICE_COMPLETION_PER_1K", "float", 0.0, OPS,
       "Price per 1k completion tokens, for the cost line.", _JUDGE),
    _s("A2C_JUDGE_TIMEOUT_S", "float", 60.0, OPS, "One judge call's timeout.", _JUDGE,
       family="A2C_JUDGE_"),
    _s("A2C_JUDGE_BACKOFF_S", "float", None, OPS, "The first retry's delay (doubles each retry).",
       _JUDGE, family="A2C_JUDGE_"),
    _s("A2C_JUDGE_CONCURRENCY", "int", None, OPS, "Judge calls in flight.", _JUDGE,
       family="A2C_JUDGE_"),
    _s("A2C_JUDGE_CACHE", "path", "<the grader's cache_dir>", OPS,
       "The disk cache of judgments.", "runtime/graders/judge.py"),
    # ------------------------------------------------------------------ operator: driver providers
    _s("A2C_DRIVERS_FILE", "path", "<config dir>/drivers.yaml", OPS,
       "The driver providers file (runtime/driver_gateway/drivers.schema.json).",
       "runtime/driver_gateway/config.py"),
    _s("A2C_DRIVER_<PROVIDER>_BASE_URL", "url", None, OPS,
       "A driver provider's upstream URL (over the drivers file).", "runtime/driver_gateway/config.py"),
    _s("A2C_DRIVER_<PROVIDER>_KEY_ENV", "str", None, OPS,
       "The variable that holds that provider's key.", "runtime/driver_gateway/config.py"),
    _s("A2C_DRIVER_<PROVIDER>_WIRES", "list", None, OPS,
       "The wires that provider speaks (comma-separated).", "runtime/driver_gateway/config.py"),
    # ------------------------------------------------------------------ operator: processes, uids
    _s("A2C_TORCH_THREADS", "int", None, OPS,
       "CPU threads for transformers generation (default: torch's choice, 1 for tiny models).",
       "runtime/inference/transformers_engine.py"),
    _s("A2C_SNAPSHOT_EVERY_S", "float", 180.0, OPS,
       "Seconds between the recorder's workspace snapshots.", "runtime/run/context.py"),
    _s("A2C_GRADER_ACCESS_LOG", "bool", False, OPS,
       "The grader service logs every request line.", "runtime/grader_service/server.py"),
    _s("A2C_EVAL_PASS_ENV", "list", None, OPS,
       "Extra variable names passed into the evaluator child (comma-separated).",
       "runtime/grader_service/evaluator.py"),
    _s("A2C_AGENT_UID", "str", "<nobody>", OPS,
       "The agent's host uid (a number or a user name) when the runtime is root.",
       "runtime/sandbox/privileges.py"),
    _s("A2C_AGENT_GID", "str", "<the uid's group>", OPS, "The agent's host gid.",
       "runtime/sandbox/privileges.py"),
    _s("A2C_EVAL_UID", "int", 65533, OPS, "The evaluator child's uid (never 0, never the agent's).",
       "runtime/sandbox/evaluator_box.py"),
    _s("A2C_EVAL_GID", "int", "<A2C_EVAL_UID>", OPS, "The evaluator child's gid.",
       "runtime/sandbox/evaluator_box.py"),
    _s("A2C_UNSAFE_ROOT_AGENT", "bool", False, OPS,
       "Let the agent run as root without bubblewrap: debugging only, warned on every start.",
       "runtime/sandbox/privileges.py"),
    # ------------------------------------------------------------------ runtime -> agent interface
    _s("A2C_WORKSPACE", "path", "/workspace", IFC, "The agent's workspace (its cwd).", _SBX),
    _s("A2C_OUTPUT_DIR", "path", "/workspace/output", IFC,
       "Where the agent saves the models it submits.", _SBX),
    _s("A2C_DATA_DIR", "path", "/data", IFC, "The agent's training data.", _SBX),
    _s("A2C_BASE_MODEL", "path", "/model", IFC, "The base model's folder.", _SBX),
    _s("A2C_GRADER_URL", "url", "unix:/run/a2c/grader.sock", IFC,
       "The grader service (`unix:PATH` or `http://127.0.0.1:PORT`).", _SBX),
    _s("A2C_TOKEN", "str", None, IFC, "The run's bearer token for the grader service.",
       "runtime/run/agent.py, templates/task/workspace/a2c_client.py.j2"),
    _s("A2C_TASK_ID", "str", None, IFC, "The task's id.", "runtime/run/agent.py"),
    _s("A2C_MODE", "str", None, IFC, "The run's training mode (`a2c.modes.MODES`).",
       "runtime/run/agent.py"),
    _s("A2C_SEED", "int", None, IFC, "The run's seed.", "runtime/run/agent.py"),
    _s("A2C_DEADLINE", "float", None, IFC, "The budget's end, Unix seconds (empty: none).",
       "runtime/run/agent.py"),
    _s("A2C_COMMAND_LOG", "path", "/run/a2c/commands.log", IFC,
       "Where the bash hook appends every command the agent runs.", _SBX),
    _s("A2C_PROMPT_FILE", "path", None, IFC, "The rendered prompt a scaffold is started with.",
       "runtime/run/agent.py, templates/agent/launch.sh.j2"),
    _s("A2C_PROMPT", "str", None, IFC, "That prompt's text (launch.sh reads the file into it).",
       "templates/agent/launch.sh.j2"),
    _s("A2C_AGENT_DIR", "path", None, IFC, "The agent bundle's folder.", "runtime/run/agent.py"),
    _s("A2C_AGENT_PARAMS", "str", None, IFC,
       "The agent's params (its spec's `params:`, with the run's `--agent-param` or suite "
       "overrides), one JSON object; recorded in run.json as `options.agent_params`.",
       "a2c/contracts/agent_params.py, runtime/run/agent.py, agents/kit/params.py"),
    _s("A2C_AGENT_HOME", "path", "/run/a2c/home", IFC, "A scaffold's HOME.",
       "runtime/sandbox/local.py"),
    _s("A2C_DRIVER", "str", None, IFC, "The run's driver (`provider/model`).", _GW),
    _s("A2C_DRIVER_MODEL", "str", None, IFC, "The model part a scaffold is told.", _GW),
    _s("A2C_DRIVER_WIRE", "str", None, IFC, "The wire the gateway speaks to the agent.", _GW),
    _s("A2C_DRIVER_CONTEXT", "int", None, IFC,
       "The served model's context in tokens, set only when a2c knows it (a `vllm/` driver, a "
       "provider with a stated or asked `context`): a scaffold spec passes it on with "
       "`${A2C_DRIVER_CONTEXT:+...}` so its compaction fits the model.",
       "runtime/run/driver.py"),
    _s("A2C_DRIVER_SOCKET", "path", "/run/a2c/driver.sock", IFC, "The driver gateway's socket.", _GW),
    _s("A2C_DRIVER_KEY", "str", None, IFC, "The run's key for the driver gateway.", _GW),
    _s("A2C_DRIVER_URL", "url", None, IFC,
       "The gateway as a loopback URL (launch.sh starts the forwarder).",
       "templates/agent/launch.sh.j2, runtime/sandbox/loopback_forwarder.py"),
    _s("A2C_SERVICE_URL_<NAME>", "url", None, IFC,
       "A task environment service's proxy inside the sandbox (`unix:/run/a2c/env/<name>.sock`).",
       "runtime/env_services/proxy.py"),
    # ------------------------------------------------------------------ internal
    _s("A2C_SANDBOX_ID", "str", None, N,
       "The run's marker in the agent's environment, to find every process it started.",
       "runtime/sandbox/proctree.py"),
    _s("A2C_HELDOUT", "path", None, N, "The held-out file the evaluator child scores.",
       "runtime/grader_service/evaluate_one.py"),
    _s("A2C_EXEC_NONCE", "str", None, N, "The code-execution child's result nonce.",
       "runtime/graders/code_exec.py"),
    _s("A2C_EXEC_MEM", "int", 0, N, "Its address-space limit, bytes.", "runtime/graders/code_exec.py"),
    _s("A2C_EXEC_CPU", "int", 0, N, "Its CPU-time limit, seconds.", "runtime/graders/code_exec.py"),
    _s("A2C_EXEC_FSIZE", "int", 0, N, "Its file-size limit, bytes.", "runtime/graders/code_exec.py"),
    _s("A2C_EXEC_BLOCK", "list", None, N, "The modules it may not import.",
       "runtime/graders/code_exec.py"),
    _s("A2C_SERVICE_PORT", "int", None, N, "The port an environment service listens on.",
       "runtime/env_services/process.py"),
    _s("A2C_SERVICE_NAME", "str", None, N, "The environment service's name.",
       "runtime/env_services/process.py"),
    _s("A2C_HOOK_ACTIVE", "bool", False, N,
       "Set by the outermost hooked shell so nested shells do not log twice.",
       "templates/task/hooks/bash_logging.sh.j2"),
    _s("A2C_BASE_IMAGE", "str", "<the task's base_image>", N,
       "A Dockerfile build argument: the image the task image starts from.",
       "templates/task/Dockerfile.j2, runtime/sandbox/docker_images.py"),
    # ------------------------------------------------------------------ markers (not variables)
    _s("A2C_EOF", "str", None, M, "A heredoc delimiter in the scripted driver's tool calls.",
       "agents/scripted_driver/tools.py"),
    _s("A2C_END_OF_FILE", "str", None, M, "A heredoc delimiter in launch.sh.",
       "templates/agent/launch.sh.j2"),
    # ------------------------------------------------------------------ test and development
    _s("A2C_NO_BWRAP", "bool", False, T,
       "Pretend this host has no bubblewrap (tests of the detection); runs use `--no-bwrap`.",
       "runtime/sandbox/bwrap.py"),
    _s("A2C_WHEEL_TEST", "bool", False, T, "tests/test_packaging.py checks the installed wheel.",
       "noxfile.py"),
    _s("A2C_VLLM_SERVER_TEST", "bool", False, T, "Run the vLLM server test.", "noxfile.py"),
    _s("A2C_NOX_FRESH", "bool", False, T, "nox installs into its own venv.", "noxfile.py"),
    _s("A2C_DOCKER_SOCK", "path", "/var/run/docker.sock", T,
       "The socket scripts/docker_engine.sh starts dockerd on.", "scripts/docker_engine.sh"),
    _s("A2C_DOCKERD_LOG", "path", "/var/log/a2c-dockerd.log", T, "That dockerd's log.",
       "scripts/docker_engine.sh"),
    *(_s(name, type_, default, T, doc, where) for name, type_, default, doc, where in (
        ("A2C_E2E_DRIVER", "str", "scripted:sft-recipe", "The scaffolds' end-to-end test driver.",
         "tests/agents/test_scaffolds_e2e.py"),
        ("A2C_E2E_SFT_STEPS", "int", 10, "Its SFT steps.", "tests/agents/test_scaffolds_e2e.py"),
        ("A2C_E2E_SFT_BATCH", "int", 4, "Its SFT batch.", "tests/agents/test_scaffolds_e2e.py"),
        ("A2C_SAVE_AGENT_FIXTURES", "bool", False, "Save the scaffolds' records as fixtures.",
         "tests/agents/test_scaffolds_e2e.py"),
        ("A2C_L3_RL_TEST_GAIN", "bool", False, "ref-l3-rl's end-to-end test asserts a gain.",
         "tests/reference_agents/test_l3_rl_e2e.py"),
        ("A2C_L3_RL_TEST_TASK", "str", "textquest-short", "That test's task.",
         "tests/reference_agents/test_l3_rl_e2e.py"),
        ("A2C_L3_RL_TEST_BUDGET", "str", "5m", "That test's budget (12m with the gain).",
         "tests/reference_agents/test_l3_rl_e2e.py"),
        ("A2C_VLLM_SERVER_MODEL", "str", None, "The vLLM server test's judge model.",
         "tests/runtime/graders/test_judge_vllm_server.py"),
        ("A2C_VLLM_SERVER_N", "int", 8, "Its items.", "tests/runtime/graders/test_judge_vllm_server.py"),
        ("A2C_VLLM_SERVER_START_TIMEOUT", "float", 900.0, "Its server start timeout, seconds.",
         "tests/runtime/graders/test_judge_vllm_server.py"),
        ("A2C_VLLM_SERVER_REPORT", "path", None, "Where it writes its report.",
         "tests/runtime/graders/test_judge_vllm_server.py"),
        ("A2C_CHROMIUM", "path", None, "The browser the page tests drive.",
         "tests/analysis/chromium_page.py"),
        ("A2C_SCREENSHOT_OUT", "path", None, "Keep the page tests' screenshots there.",
         "tests/analysis/test_browser.py"),
    )),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
assert len(BY_NAME) == len(SETTINGS), "a variable is declared twice"
assert all(s.type in TYPES for s in SETTINGS)


def lookup(name: str) -> Setting:
    """The declaration of `name` (a plain name, or one a pattern matches); KeyError if none."""
    if name in BY_NAME:
        return BY_NAME[name]
    for setting in SETTINGS:
        if setting.is_pattern and setting.regex().match(name):
            return setting
    raise KeyError(f"{name} is not a declared a2c setting (a2c/settings.py)")


def unread(environ: Mapping[str, str] | None = None) -> list[str]:
    """The `A2C_*` names set in `environ` that a2c reads nowhere: a typo, or one of the knobs
    that became agent params (`a2c agents params ID`); silently ignored otherwise."""
    environ = os.environ if environ is None else environ
    names = []
    for name in sorted(n for n in environ if n.startswith("A2C_")):
        try:
            lookup(name)
        except KeyError:
            names.append(name)
    return names


def parse(setting: Setting, raw: str, name: str | None = None) -> object:
    """`raw` as the setting's type; a bad value is one A2CError naming the variable."""
    name = name or setting.name
    text = raw.strip()
    try:
        if setting.type == "bool":
            if text.lower() in TRUE:
                return True
            if text.lower() in FALSE:
                return False
            raise ValueError(f"expected one of {', '.join(TRUE + FALSE[1:])}")
        if setting.type == "int":
            return int(text)
        if setting.type == "float":
            return float(text)
        if setting.type == "path":
            return Path(text).expanduser()
        if setting.type == "list":
            return [part.strip() for part in text.split(",") if part.strip()]
        return text
    except ValueError as exc:
        raise A2CError(f"{name}={raw!r}: not a valid {setting.type} ({exc}); "
                       f"{setting.doc}") from None


def get(name: str, environ: Mapping[str, str] | None = None) -> object:
    """The variable's value now: parsed when set and not empty, else the declared default
    (None when the default is computed by the caller: `<...>` in the table)."""
    setting = lookup(name)
    raw = (os.environ if environ is None else environ).get(name)
    if raw is None or raw.strip() == "":
        if setting.type == "bool":
            return bool(setting.default)
        default = setting.default
        return None if isinstance(default, str) and default.startswith("<") else default
    return parse(setting, raw, name)


def get_path(name: str, environ: Mapping[str, str] | None = None) -> Path | None:
    value = get(name, environ)
    return Path(value).expanduser() if value is not None else None


def get_bool(name: str, environ: Mapping[str, str] | None = None) -> bool:
    return bool(get(name, environ))
