"""The Docker engine, as the docker backend reaches it: one client, or one clear `RunError`.

The engine is the host's dockerd (`scripts/docker_engine.sh` installs and starts it as the
project expects: `--bridge=none --iptables=false`, so only the `none` and `host` networks exist).
The docker SDK is an optional extra; a missing SDK and an unreachable engine are both one line.
"""

from __future__ import annotations

from a2c.errors import RunError

NO_ENGINE = ("docker backend: no Docker engine is reachable ({detail}); start dockerd "
             "(bash scripts/docker_engine.sh) or use --backend local")


def client():
    """A docker SDK client that answered a ping; `RunError` (one line) otherwise."""
    try:
        import docker
        import requests
    except ImportError as exc:
        raise RunError("docker backend: the docker SDK is not installed "
                       "(pip install 'a2c[docker]')") from exc
    try:
        found = docker.from_env(timeout=600)
        found.ping()
        return found
    except (docker.errors.DockerException, requests.exceptions.ConnectionError) as exc:
        detail = (str(exc).splitlines() or [type(exc).__name__])[0][:160]
        raise RunError(NO_ENGINE.format(detail=detail)) from exc


def engine_error(exc: BaseException) -> str:
    """The engine's own words for a failed call, on one line (the API's explanation if any)."""
    text = getattr(exc, "explanation", None) or str(exc) or type(exc).__name__
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return " ".join(str(text).split())[:400]
