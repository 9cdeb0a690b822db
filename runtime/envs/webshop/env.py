"""WebShop adapter: one episode = one WebShop session, spoken to over WebShop's HTTP protocol.

The WebShop server (princeton-nlp/WebShop `web_agent_site/app.py`, or the tests'
WebShop-compatible `tests/fixtures/l3/webshop/fixture_server.py`) runs as a service the task declares (`environment.services`); this
adapter only speaks HTTP to it, the way the ReAct/WebShop text clients do:

    reset                 GET {base}/{session}
    search[q]             GET {base}/search_results/{session}/{q}/1            (start page only)
    click[<asin>]         GET {base}/item_page/{session}/{asin}/{q}/{page}/{options}
    click[<option>]       the item page again with options[type] = option
    click[Description|Features|Reviews|Attributes]
                          GET {base}/item_sub_page/{session}/{asin}/{q}/{page}/{sub}/{options}
    click[< Prev]         sub page -> item page -> results page -> previous results page
    click[Next >]         GET {base}/search_results/{session}/{q}/{page + 1}
    click[Back to Search] GET {base}/{session}
    click[Buy Now]        GET {base}/done/{session}/{asin}/{options}   -> reward, episode ends
    think[...]            no request; observation "OK." (ReAct's reasoning action)

Path segments are percent-encoded; `options` is the Python dict literal WebShop parses with
`ast.literal_eval`; a `/` in a query is replaced by a space (Flask would split the route on it).
The session id `fixed_<i>` selects WebShop instruction i.

Pages are HTML; the observation is WebShop's text-env form: the visible text pieces joined with
` [SEP] ` (the instruction shown once, on the start page and as the episode's task). Clickables
(buttons, product ASINs, option labels) come back in `info["admissible_commands"]` as `click[...]`
actions, `search[<query>]` on the start page. Reward: the score on the done page ("Your score (min
0.0, max 1.0)"), WebShop's attribute/option/price/type match; `won` = reward 1.0.

Failures: an unparseable action, a click on something the page does not offer, or `search` off the
start page raise `BadAction` (option `invalid_action: noop` keeps WebShop's own no-op behaviour
instead); an unreachable server, an HTTP error or a page without the expected content raise
`EnvCrash`. Each request has `request_timeout_s` (default 30).

Options (`grader.env.options`): `base_url` (default `$A2C_WEBSHOP_URL` or
`http://127.0.0.1:3000`), `service` (the name of the task's declared service this adapter talks
to, default `webshop`), `request_timeout_s`, `invalid_action` (`fail`|`noop`), `max_products`
(results shown per page, default all the server sends).

Inside an agent's sandbox the runtime sets `$A2C_SERVICE_URL_<SERVICE>` to its proxy
(`unix:/run/a2c/env/<service>.sock`, `runtime/env_services/proxy.py`): it comes before `base_url`,
so the workspace's rollout script reaches the server; the proxy passes only the sessions of the
agent's split (`agent_path_filter`). `unix:<path>` URLs are spoken over that Unix socket.
"""

from __future__ import annotations

import os
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from html.parser import HTMLParser

from a2c.runtime.env_services.proxy import path_segments, service_url_var
from a2c.runtime.envs.base import BadAction, EnvCrash
from a2c.runtime.envs.prompts import PromptFormat
from a2c.settings import get as setting
from a2c.unixhttp import UnixHTTPConnection

DEFAULT_URL = "http://127.0.0.1:3000"
SCORE_LABEL = "Your score (min 0.0, max 1.0)"
SUB_PAGES = ("Description", "Features", "Reviews", "Attributes")
ACTION_RE = re.compile(r"\b(search|click|think)\[(.*)\]", re.I | re.S)


# ------------------------------------------------------------------------------- HTML -> text
class _Visible(HTMLParser):
    """Visible text pieces with the kind of element holding them (WebShop's tag_visible rule)."""

    HIDDEN = {"style", "script", "head", "title", "meta"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, str]] = []
        self.pieces: list[tuple[str, str]] = []       # (text, kind)

    def handle_starttag(self, tag, attrs):
        if tag in ("input", "br", "img", "meta", "link", "hr"):
            return
        self.stack.append((tag, dict(attrs).get("class") or ""))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break

    def handle_data(self, data):
        text = " ".join(data.split())
        if not text or any(t in self.HIDDEN for t, _ in self.stack):
            return
        tag, cls = self.stack[-1] if self.stack else ("", "")
        if tag == "button":
            kind = "button"
        elif tag == "label":
            kind = "option"
        elif "product-link" in cls.split():
            kind = "product"
        else:
            kind = "text"
        self.pieces.append((text, kind))


def parse_page(page: str) -> list[tuple[str, str]]:
    p = _Visible()
    p.feed(page)
    p.close()
    return p.pieces


def _q(x) -> str:
    return urllib.parse.quote(str(x), safe="")


# ------------------------------------------------------------------------------- the episode
@dataclass
class _Page:
    """Where the episode is on the site: the page, the query and results page it came from, the
    product and options chosen, and what the page offers to click."""

    page_type: str = "init"          # init | search | item | item_sub | end
    query: str = ""
    page: int = 1
    options: dict[str, str] = field(default_factory=dict)   # option type -> chosen option
    asin: str | None = None
    sub: str | None = None           # the item's sub page (Description, Features, ...)
    reward: float | None = None
    buttons: list[str] = field(default_factory=list)
    asins: list[str] = field(default_factory=list)
    option_types: dict[str, str] = field(default_factory=dict)   # option -> its type


@dataclass(frozen=True)
class SessionRecord:
    """A WebShop data record as the environment and the agent's proxy read it: the session it
    plays (`session`, else `session_id`, else the record's `id`) and the server it names, if any
    (`base_url`: several WebShop servers, one shard each)."""
    session: str
    base_url: str = ""

    @classmethod
    def from_record(cls, record: dict) -> SessionRecord:
        return cls(session=str(record.get("session") or record.get("session_id") or record["id"]),
                   base_url=str(record.get("base_url") or ""))


class WebShopEnv:
    """One WebShop session. `record`: `{"id", "session" (default: id), "base_url" (optional)}`."""

    def __init__(self, record: dict, options: dict | None = None):
        opts = dict(options or {})
        self.record = record
        played = SessionRecord.from_record(record)
        self.session = played.session
        # inside the agent's sandbox the runtime's proxy stands in for the configured server
        proxy = os.environ.get(service_url_var(str(opts.get("service") or "webshop")))
        self.base_url = str(played.base_url or proxy or opts.get("base_url")
                            or setting("A2C_WEBSHOP_URL") or DEFAULT_URL).rstrip("/")
        self.timeout = float(opts.get("request_timeout_s", 30))
        self.invalid_action = str(opts.get("invalid_action", "fail"))
        self.max_products = opts.get("max_products")
        self.state = _Page()
        self.instruction = ""
        self.done = False

    # -- HTTP -------------------------------------------------------------------------------
    def _get(self, path: str) -> str:
        if self.base_url.startswith("unix:"):
            return self._get_unix(path)
        url = self.base_url + path
        try:
            with urllib.request.urlopen(url, timeout=self.timeout) as resp:
                return resp.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as exc:
            raise EnvCrash(f"WebShop server answered {exc.code} for {path}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise EnvCrash(f"WebShop server unreachable at {self.base_url}: {reason}") from None

    def _get_unix(self, path: str) -> str:
        conn = UnixHTTPConnection(self.base_url[len("unix:"):], timeout=self.timeout)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            body = resp.read().decode("utf-8", "replace")
        except OSError as exc:
            raise EnvCrash(f"WebShop server unreachable at {self.base_url}: {exc}") from None
        finally:
            conn.close()
        if resp.status >= 400:
            reason = body.strip()[:200] if resp.status == 403 else ""
            raise EnvCrash(f"WebShop server answered {resp.status} for {path}"
                           + (f": {reason}" if reason else ""))
        return body

    def _url(self, page_type: str) -> str:
        s = self.state
        sid = _q(self.session)
        if page_type == "init":
            return f"/{sid}"
        kw = _q(s.query)
        if page_type == "search":
            return f"/search_results/{sid}/{kw}/{s.page}"
        opts = _q(repr(s.options or {}))
        if page_type == "item":
            return f"/item_page/{sid}/{_q(s.asin)}/{kw}/{s.page}/{opts}"
        if page_type == "item_sub":
            return f"/item_sub_page/{sid}/{_q(s.asin)}/{kw}/{s.page}/{_q(s.sub)}/{opts}"
        if page_type == "end":
            return f"/done/{sid}/{_q(s.asin)}/{opts}"
        raise ValueError(page_type)

    # -- pages ------------------------------------------------------------------------------
    def _load(self, page_type: str) -> tuple[str, dict]:
        pieces = parse_page(self._get(self._url(page_type)))
        self.state.page_type = page_type
        texts = [t for t, _ in pieces]
        if page_type == "end":
            if SCORE_LABEL not in texts or texts.index(SCORE_LABEL) + 1 >= len(texts):
                raise EnvCrash("the WebShop done page shows no score")
            try:
                reward = float(texts[texts.index(SCORE_LABEL) + 1])
            except ValueError:
                raise EnvCrash("the WebShop done page shows no numeric score") from None
            self.state.reward = reward
            return f"{SCORE_LABEL}: {reward}", {}
        # the instruction block: "Instruction:" then its text
        if "Instruction:" in texts:
            i = texts.index("Instruction:")
            if i + 1 < len(texts):
                self.instruction = self.instruction or texts[i + 1]
                if page_type != "init":
                    del pieces[i:i + 2]
        buttons, asins, option_types = [], [], {}
        shown, last_text, n_products = [], "", 0
        for text, kind in pieces:
            if kind == "product":
                n_products += 1
                if self.max_products is not None and n_products > int(self.max_products):
                    continue
                asins.append(text)
            elif kind == "button":
                if page_type != "init":
                    buttons.append(text)
            elif kind == "option":
                option_types[text] = last_text
            else:
                last_text = text
            shown.append(text)
        if page_type == "init" and not any(k == "button" and t.lower() == "search" for t, k in pieces):
            raise EnvCrash("the WebShop start page has no search box")
        self.state.buttons, self.state.asins = buttons, asins
        self.state.option_types = option_types
        return " [SEP] ".join(shown), self._info()

    def clickables(self) -> list[str]:
        s = self.state
        return [*s.buttons, *s.asins, *s.option_types]

    def _info(self) -> dict:
        s = self.state
        acts = ["search[<query>]"] if s.page_type == "init" else \
            [f"click[{c}]" for c in self.clickables()]
        return {"admissible_commands": acts, "won": False, "page_type": s.page_type,
                "options": dict(s.options), "asin": s.asin, "session": self.session}

    # -- protocol ---------------------------------------------------------------------------
    def reset(self) -> tuple[str, dict]:
        self.state = _Page()
        self.instruction, self.done = "", False
        obs, info = self._load("init")
        if not self.instruction:
            raise EnvCrash("the WebShop start page shows no instruction")
        info["task"] = self.instruction
        return obs, info

    def _bad(self, message: str) -> tuple[str, float, bool, dict]:
        if self.invalid_action == "noop":
            return f"Invalid action: {message}", 0.0, False, self._info()
        raise BadAction(message)

    def step(self, action: str) -> tuple[str, float, bool, dict]:
        if self.done:
            raise BadAction("the episode is over (already bought)")
        m = ACTION_RE.fullmatch((action or "").strip())
        if not m:
            return self._bad(f"expected search[query] or click[button], got {action[:80]!r}")
        verb, arg = m.group(1).lower(), m.group(2).strip()
        s = self.state
        page = s.page_type
        if verb == "think":
            return "OK.", 0.0, False, self._info()
        if verb == "search":
            if page != "init":
                return self._bad("search is only possible on the start page (click[Back to Search] first)")
            query = " ".join(arg.replace("/", " ").split())
            if not query:
                return self._bad("empty search query")
            s.query, s.page, s.options = query, 1, {}
            obs, info = self._load("search")
            return obs, 0.0, False, info
        # click
        by_lower = {c.lower(): c for c in self.clickables()}
        target = by_lower.get(arg.lower())
        if target is None:
            return self._bad(f"{arg!r} is not clickable on this page"
                             + (f" (clickable: {', '.join(self.clickables()[:20])})"
                                if self.clickables() else ""))
        if target == "Back to Search":
            s.options, s.asin = {}, None
            obs, info = self._load("init")
        elif target == "Next >":
            s.page += 1
            obs, info = self._load("search")
        elif target == "< Prev":
            if page == "item_sub":
                obs, info = self._load("item")
            elif page == "item":
                s.options = {}
                obs, info = self._load("search")
            else:
                s.page = max(1, s.page - 1)
                obs, info = self._load("search")
        elif target == "Buy Now" and page == "item":
            obs, _ = self._load("end")
            self.done = True
            reward = float(s.reward or 0.0)
            info = {"admissible_commands": [], "won": reward >= 1.0 - 1e-9,
                    "final_reward": reward, "reward": reward, "asin": s.asin,
                    "options": dict(s.options), "page_type": "end",
                    "session": self.session}
            return obs, reward, True, info
        elif target in SUB_PAGES and page == "item":
            s.sub = target
            obs, info = self._load("item_sub")
        elif page == "search" and target in s.asins:
            s.asin, s.options = target, {}
            obs, info = self._load("item")
        elif page == "item" and target in s.option_types:
            s.options[s.option_types[target]] = target
            obs, info = self._load("item")
            obs = f"You have clicked {target}. [SEP] " + obs
        else:
            return self._bad(f"{target!r} cannot be clicked on the {page} page")
        return obs, 0.0, False, info

    def close(self) -> None:
        self.state = _Page()


# ------------------------------------------------------------------------------- prompt format
class WebShopFormat(PromptFormat):
    kind = "webshop"
    system = ("You are shopping on the WebShop website for the product the instruction describes. "
              "Reply with exactly one action and nothing else: search[your query] on the search "
              "page, or click[button] with a button, product code or option from the list of valid "
              "actions. Choose the options the instruction asks for, then click[Buy Now].")
    max_listed_actions = 60

    def parse_action(self, output: str) -> str:
        for line in (output or "").split("\n"):
            m = ACTION_RE.search(line)
            if m:
                return f"{m.group(1).lower()}[{m.group(2).strip()}]"
        raise BadAction(f"no search[...] or click[...] action in model output {(output or '')[:80]!r}")


# ------------------------------------------------------------------------------- the agent's door
ROUTES_WITH_SESSION_SECOND = ("search_results", "item_page", "item_sub_page", "done")


def agent_path_filter(records: list[dict]):
    """The proxy's rule: a request passes when the WebShop session it names is one of the
    agent split's (`/{session}` or `/{route}/{session}/...`); anything else (a held-out or a
    random session, whose goal WebShop could draw from the held-out range) is refused."""
    allowed = {SessionRecord.from_record(r).session for r in records}

    def allow(path: str) -> bool:
        parts = path_segments(path)
        if len(parts) == 1:
            return parts[0] in allowed
        if len(parts) >= 2 and parts[0] in ROUTES_WITH_SESSION_SECOND:
            return parts[1] in allowed
        return False

    return allow
