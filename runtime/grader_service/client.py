"""A small Python client for the grader service (the runtime's side; the agent has its own
standard-library copy in the workspace, `a2c_client.py`). Its connections are `a2c.unixhttp`'s."""

from __future__ import annotations

import http.client
import json
from typing import Any

from a2c.unixhttp import connect


class GraderClientError(Exception):
    def __init__(self, status: int, body: dict[str, Any]):
        self.status, self.body = status, body
        self.code = body.get("error")
        super().__init__(f"{status} {body.get('error')}: {body.get('message')}")


class ServiceClient:
    """`ServiceClient("http://127.0.0.1:PORT" | "unix:/path.sock", token)`."""

    def __init__(self, url: str, token: str | None, timeout: float = 30.0):
        self.url, self.token, self.timeout = url, token, timeout

    def _connection(self) -> http.client.HTTPConnection:
        return connect(self.url, self.timeout)

    def request(self, method: str, path: str, body: Any = None,
                raise_for_status: bool = True) -> tuple[int, dict[str, Any]]:
        conn = self._connection()
        try:
            headers = {"Accept": "application/json"}
            if self.token:
                headers["Authorization"] = f"Bearer {self.token}"
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
            try:
                payload = json.loads(raw) if raw else {}
            except ValueError:
                payload = {"error": "bad_response", "message": raw[:200].decode(errors="replace")}
            if raise_for_status and resp.status >= 400:
                raise GraderClientError(resp.status, payload)
            return resp.status, payload
        finally:
            conn.close()

    def health(self) -> bool:
        try:
            return self.request("GET", "/health")[1].get("ok") is True
        except (OSError, GraderClientError, http.client.HTTPException):
            return False

    def submit(self, model_path: str, note: str = "") -> dict[str, Any]:
        return self.request("POST", "/submit", {"model_path": model_path, "note": note})[1]

    def status(self, sid: int) -> dict[str, Any]:
        return self.request("GET", f"/submissions/{sid}")[1]

    def list(self) -> dict[str, Any]:
        return self.request("GET", "/submissions")[1]

    def time(self) -> dict[str, Any]:
        return self.request("GET", "/time")[1]
