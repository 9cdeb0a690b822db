"""A small WebShop-compatible server: the routes and reward of princeton-nlp/WebShop, 8 products.

Written by the project for tests and demos (no Flask, no spaCy, no product index); the real
benchmark runs the real WebShop server (see `specs/tasks/webshop.yaml`). Run it with

    python -m a2c.runtime.envs.webshop_fixture --port 3000 [--host 127.0.0.1]

Routes (GET; the real server also accepts POST on them), as the real `web_agent_site/app.py`:

    /                                                   -> 302 to /abc (also our health check)
    /<session_id>                                       start page: instruction + search box
    /search_results/<session_id>/<keywords>/<page>      10 results a page
    /item_page/<session_id>/<asin>/<keywords>/<page>/<options>
    /item_sub_page/<session_id>/<asin>/<keywords>/<page>/<sub_page>/<options>
    /done/<session_id>/<asin>/<options>                 the purchase: "Your score (min 0.0, max 1.0)"

`session_id` `fixed_<i>` selects instruction i (WebShop's convention); any other id gets
instruction `sha256(id) mod n`. `keywords` is a space-separated query or a Python list literal;
`options` is a Python dict literal `{option type: chosen value}` (WebShop parses both with
`ast.literal_eval`). Path segments are percent-encoded.

Reward: WebShop's `get_reward` (web_agent_site/engine/goal.py):

    r = (n_attribute_matches + n_option_matches + [price <= price_upper])
        / (n_goal_attributes + n_goal_options + 1) * r_type

with attributes matched by fuzzy token-set ratio > 85 against the product's attributes, or as a
substring of its title, bullet points or description; options matched by token-set ratio > 85
after colour normalisation; `r_type` 1.0 / 0.5 / 0.1 / 0.0 from the query, category and product
type (title) match. Two documented deviations: the type words of a product name are its content
words (WebShop keeps spaCy's NOUN/PROPN tokens), and the fuzzy ratio is difflib's (WebShop uses
thefuzz; the two differ by a point or two on some strings, never on the fixture's data).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import hashlib
import html
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from a2c.runtime.service_gateway import path_segments

PAGE_SIZE = 10
SCORE_LABEL = "Your score (min 0.0, max 1.0)"
SUB_PAGES = ("Description", "Features", "Reviews", "Attributes")

# --------------------------------------------------------------------------------- the products
PRODUCTS: list[dict] = [
    {"asin": "b0fix00001", "name": "deodorant", "query": "deodorant",
     "Title": "Bright Citrus Natural Deodorant for Sensitive Skin, Aluminum Free",
     "product_category": "Beauty & Personal Care › Personal Care › Deodorants & Antiperspirants › Deodorant",
     "price": 12.99, "Attributes": ["sensitive skin", "aluminum free"],
     "BulletPoints": ["Gentle formula made with coconut oil", "Lasts all day"],
     "Description": "A plant-based deodorant that keeps you fresh without aluminum.",
     "Reviews": ["Works well and smells great."],
     "options": {"size": ["2 ounce", "3 ounce (pack of 1)", "3 ounce (pack of 2)"],
                 "scent": ["bright citrus", "lavender", "unscented"]}},
    {"asin": "b0fix00002", "name": "deodorant stick", "query": "deodorant",
     "Title": "Men's Cooling Sport Deodorant Stick, Fresh Scent",
     "product_category": "Beauty & Personal Care › Personal Care › Deodorants & Antiperspirants › Deodorant",
     "price": 8.5, "Attributes": ["long lasting"],
     "BulletPoints": ["48 hour odor protection", "Cooling sensation"],
     "Description": "A sport deodorant stick for men.", "Reviews": ["Good value."],
     "options": {"size": ["2.6 ounce", "3 ounce"]}},
    {"asin": "b0fix00003", "name": "bluetooth speaker", "query": "bluetooth speaker",
     "Title": "Wireless Bluetooth Speaker with Double Horn, Waterproof",
     "product_category": "Electronics › Portable Audio & Video › Portable Speakers & Docks › Portable Bluetooth Speakers",
     "price": 39.99, "Attributes": ["waterproof", "easy carry"],
     "BulletPoints": ["Double horn stereo sound", "12 hour playtime"],
     "Description": "A loud outdoor speaker you can take to the pool.", "Reviews": ["Loud!"],
     "options": {"color": ["black", "blue", "red"]}},
    {"asin": "b0fix00004", "name": "portable speaker", "query": "bluetooth speaker",
     "Title": "Mini Portable Speaker, Rechargeable Battery",
     "product_category": "Electronics › Portable Audio & Video › Portable Speakers & Docks › Portable Bluetooth Speakers",
     "price": 19.99, "Attributes": ["high power", "usb port"],
     "BulletPoints": ["Charges over a usb port", "Fits in a pocket"],
     "Description": "A small rechargeable speaker.", "Reviews": ["Cute and small."],
     "options": {"color": ["white", "pink"]}},
    {"asin": "b0fix00005", "name": "yoga pants", "query": "women yoga pants",
     "Title": "Women's Slim Fit Yoga Pants with Pockets, High Waist",
     "product_category": "Clothing, Shoes & Jewelry › Women › Clothing › Active › Active Pants",
     "price": 24.99, "Attributes": ["machine wash", "high waist"],
     "BulletPoints": ["Four-way stretch fabric", "Two side pockets"],
     "Description": "Comfortable leggings for yoga and running.", "Reviews": ["Fits true to size."],
     "options": {"color": ["navy blue", "black", "heather grey"],
                 "size": ["small", "medium", "large"]}},
    {"asin": "b0fix00006", "name": "green tea bags", "query": "green tea",
     "Title": "Organic Green Tea Bags, Caffeine Free Herbal Blend",
     "product_category": "Grocery & Gourmet Food › Beverages › Coffee, Tea & Cocoa › Tea › Green",
     "price": 9.49, "Attributes": ["certified organic", "caffeine free"],
     "BulletPoints": ["Individually wrapped bags"], "Description": "A mild green tea blend.",
     "Reviews": ["My favourite tea."],
     "options": {"flavor name": ["jasmine", "mint"], "size": ["20 count", "100 count"]}},
    {"asin": "b0fix00007", "name": "chocolate bars", "query": "snack bars",
     "Title": "Gluten Free Dark Chocolate Almond Bars, 12 Pack",
     "product_category": "Grocery & Gourmet Food › Snacks & Sweets › Bars › Nutrition Bars",
     "price": 21.0, "Attributes": ["gluten free", "non gmo"],
     "BulletPoints": ["10 g of protein a bar"], "Description": "Crunchy almond snack bars.",
     "Reviews": ["Tasty."],
     "options": {"flavor name": ["dark chocolate almond", "sea salt caramel"]}},
    {"asin": "b0fix00008", "name": "hair extensions", "query": "hair extensions",
     "Title": "Clip-in Hair Extensions, Long Straight, Natural Looking",
     "product_category": "Beauty & Personal Care › Hair Care › Hair Extensions, Wigs & Accessories › Extensions",
     "price": 45.0, "Attributes": ["natural looking", "easy apply"],
     "BulletPoints": ["Seven pieces with clips"], "Description": "Straight clip-in extensions.",
     "Reviews": ["Blends in well."],
     "options": {"color": ["natural black", "dark brown", "blonde"], "size": ["18 inch", "22 inch"]}},
]

# the instructions: WebShop goals (asin, instruction_text, attributes, goal_options, price_upper)
GOALS: list[dict] = [
    {"asin": "b0fix00001", "attributes": ["sensitive skin"],
     "goal_options": ["3 ounce (pack of 1)", "bright citrus"], "price_upper": 50.0,
     "instruction_text": "i need a 3 ounce bottle of bright citrus deodorant for sensitive skin, "
                         "and price lower than 50.00 dollars"},
    {"asin": "b0fix00003", "attributes": ["waterproof"], "goal_options": ["blue"],
     "price_upper": 60.0,
     "instruction_text": "i want a waterproof bluetooth speaker with double horn in blue, and price "
                         "lower than 60.00 dollars"},
    {"asin": "b0fix00005", "attributes": ["high waist"], "goal_options": ["navy blue", "medium"],
     "price_upper": 30.0,
     "instruction_text": "i am looking for high waist yoga pants in navy blue, size medium, and "
                         "price lower than 30.00 dollars"},
    {"asin": "b0fix00006", "attributes": ["caffeine free", "certified organic"],
     "goal_options": ["jasmine", "100 count"], "price_upper": 20.0,
     "instruction_text": "i want caffeine free organic green tea bags, jasmine flavor, 100 count, "
                         "and price lower than 20.00 dollars"},
    {"asin": "b0fix00007", "attributes": ["gluten free"], "goal_options": ["sea salt caramel"],
     "price_upper": 30.0,
     "instruction_text": "i need gluten free chocolate bars with sea salt caramel flavor, and "
                         "price lower than 30.00 dollars"},
    {"asin": "b0fix00008", "attributes": ["natural looking"],
     "goal_options": ["dark brown", "22 inch"], "price_upper": 50.0,
     "instruction_text": "find me natural looking clip-in hair extensions in dark brown, 22 inch, "
                         "and price lower than 50.00 dollars"},
    {"asin": "b0fix00004", "attributes": ["usb port"], "goal_options": ["pink"],
     "price_upper": 25.0,
     "instruction_text": "i am looking for a rechargeable portable speaker in pink with a usb "
                         "port, and price lower than 25.00 dollars"},
    {"asin": "b0fix00002", "attributes": ["long lasting"], "goal_options": ["3 ounce"],
     "price_upper": 10.0,
     "instruction_text": "i want a long lasting deodorant stick for men, 3 ounce, and price lower "
                         "than 10.00 dollars"},
    {"asin": "b0fix00001", "attributes": ["aluminum free"], "goal_options": ["2 ounce", "unscented"],
     "price_upper": 20.0,
     "instruction_text": "i need an unscented aluminum free deodorant, 2 ounce, and price lower "
                         "than 20.00 dollars"},
    {"asin": "b0fix00005", "attributes": ["high waist"], "goal_options": ["black", "large"],
     "price_upper": 30.0,
     "instruction_text": "i want black high waist yoga pants in large, and price lower than 30.00 "
                         "dollars"},
]
BY_ASIN = {p["asin"]: p for p in PRODUCTS}
for _g in GOALS:                      # a goal carries its target's name, query and category
    _p = BY_ASIN[_g["asin"]]
    _g.update(name=_p["name"], query=_p["query"], product_category=_p["product_category"])


# --------------------------------------------------------------------------------- the reward
COLOR_SET = ["beige", "black", "blonde", "blue", "brown", "burgundy", "charcoal", "coral", "cream",
             "gold", "gray", "green", "grey", "heather", "ivory", "khaki", "lavender", "navy",
             "olive", "orange", "pink", "purple", "red", "rose", "silver", "tan", "teal", "white",
             "yellow"]
_STOP = {"a", "an", "and", "the", "for", "with", "of", "in", "to", "men", "women", "mens",
         "womens", "s", "new", "set", "pack", "mini", "portable"}


def normalize_color(text: str) -> str:
    """WebShop's normalize_color: the first colour word found in the string, else the string."""
    for color in COLOR_SET:
        if color in text:
            return color
    return text


def _full_process(s: str) -> str:
    return " ".join(re.sub(r"[^0-9a-zA-Z]+", " ", s).lower().split())


def _ratio(a: str, b: str) -> int:
    if not a or not b:
        return 0
    return int(round(100 * difflib.SequenceMatcher(None, a, b).ratio()))


def token_set_ratio(a: str, b: str) -> int:
    """fuzzywuzzy's token_set_ratio (difflib ratio underneath)."""
    ta, tb = set(_full_process(a).split()), set(_full_process(b).split())
    if not ta or not tb:
        return 0
    sect = " ".join(sorted(ta & tb))
    d1 = " ".join(sorted(ta - tb))
    d2 = " ".join(sorted(tb - ta))
    t1 = (sect + " " + d1).strip()
    t2 = (sect + " " + d2).strip()
    return max(_ratio(sect, t1), _ratio(sect, t2), _ratio(t1, t2))


def type_words(name: str) -> list[str]:
    return [w for w in _full_process(name).split() if w not in _STOP and not w.isdigit()]


def get_type_reward(product: dict, goal: dict) -> dict:
    query_match = product["query"] == goal["query"]
    pc = {x.strip() for x in product["product_category"].split("›")}
    gc = {x.strip() for x in goal["product_category"].split("›")}
    category_match = len(pc & gc) >= 2
    purchased, desired = type_words(product["name"]), type_words(goal["name"])
    title_score = 0.2 if not desired else len(set(purchased) & set(desired)) / len(desired)
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {"r_type": r_type, "query_match": query_match, "category_match": category_match,
            "title_score": title_score}


def get_attribute_reward(product: dict, goal: dict) -> tuple[float, int]:
    matches = 0
    for g in goal["attributes"]:
        if any(token_set_ratio(p, g) > 85 for p in product["Attributes"]) or \
                g in product["Title"].lower() or \
                g in " ".join(product["BulletPoints"]).lower() or \
                g in product["Description"].lower():
            matches += 1
    return (matches / len(goal["attributes"]) if goal["attributes"] else 0.0), matches


def get_option_reward(purchased: list[str], goal_options: list[str]) -> tuple[float | None, int]:
    purchased = [normalize_color(o) for o in purchased]
    goal_options = [normalize_color(o) for o in goal_options]
    matches = sum(1 for g in goal_options if any(token_set_ratio(p, g) > 85 for p in purchased))
    return (matches / len(goal_options) if goal_options else None), matches


def get_reward(product: dict, goal: dict, price: float, options: dict) -> tuple[float, dict]:
    r_type = get_type_reward(product, goal)
    r_price = price <= goal["price_upper"] if goal["price_upper"] > 0 else None
    r_att, n_att = get_attribute_reward(product, goal)
    r_opt, n_opt = get_option_reward(list(options.values()), goal["goal_options"])
    total = (n_att + n_opt + int(bool(r_price))) / (len(goal["attributes"]) + len(goal["goal_options"]) + 1)
    total *= r_type["r_type"]
    return total, {"r_type": r_type, "r_att": r_att, "r_option": r_opt, "r_price": r_price}


# --------------------------------------------------------------------------------- search
def search(keywords: list[str]) -> list[dict]:
    """Products ranked by how many query words their title, name, query and category contain."""
    words = {w for w in _full_process(" ".join(keywords)).split() if w not in _STOP}

    def score(p):
        text = set(_full_process(" ".join([p["Title"], p["name"], p["query"],
                                           p["product_category"]])).split())
        return len(words & text)

    ranked = sorted(PRODUCTS, key=lambda p: (-score(p), p["asin"]))
    return [p for p in ranked if score(p) > 0] or ranked


# --------------------------------------------------------------------------------- the pages
def _q(x) -> str:
    return urllib.parse.quote(str(x), safe="")


def _page(body: str, instruction: str | None) -> str:
    head = (f'<div id="instruction-text"><h4>Instruction:<br></h4><p>{html.escape(instruction)}</p>'
            "</div>" if instruction is not None else "")
    return f"<!DOCTYPE html><html><head><title>WebShop</title></head><body>{head}{body}</body></html>"


def _form(action: str, label: str) -> str:
    return f'<form method="post" action="{action}"><button type="submit">{html.escape(label)}</button></form>'


def start_page(sid: str, goal: dict) -> str:
    return ("<!DOCTYPE html><html><head><title>WebShop</title></head><body><h1>WebShop</h1>"
            f'<div id="instruction-text"><h4>Instruction:<br></h4><p>{html.escape(goal["instruction_text"])}</p></div>'
            f'<form method="post" action="/{_q(sid)}"><input type="text" name="search_query">'
            '<button type="submit">Search</button></form></body></html>')


def results_page(sid: str, goal: dict, keywords: list[str], page: int) -> str:
    ranked = search(keywords)
    shown = ranked[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]
    kw = _q(" ".join(keywords))
    parts = [_form(f"/{_q(sid)}", "Back to Search"),
             f"<h5>Page {page} (Total results: {len(ranked)})</h5>"]
    if page > 1:
        parts.append(_form(f"/search_results/{_q(sid)}/{kw}/{page - 1}", "< Prev"))
    if page * PAGE_SIZE < len(ranked):
        parts.append(_form(f"/search_results/{_q(sid)}/{kw}/{page + 1}", "Next >"))
    for p in shown:
        href = f"/item_page/{_q(sid)}/{p['asin']}/{kw}/{page}/{_q('{}')}"
        parts.append(f'<div class="list-group-item"><h4><a class="product-link" href="{href}">'
                     f'{p["asin"]}</a></h4><h4 class="product-title">{html.escape(p["Title"])}</h4>'
                     f'<h5 class="product-price">${p["price"]:.2f}</h5></div>')
    return _page("".join(parts), goal["instruction_text"])


def item_page(sid: str, goal: dict, asin: str, keywords: str, page: int, options: dict) -> str:
    p = BY_ASIN[asin]
    kw = _q(keywords)
    parts = [_form(f"/{_q(sid)}", "Back to Search"),
             _form(f"/search_results/{_q(sid)}/{kw}/{page}", "< Prev")]
    for otype, values in p["options"].items():
        parts.append(f"<h4>{html.escape(otype)}</h4>")
        for v in values:
            checked = " checked" if options.get(otype) == v else ""
            parts.append(f'<input type="radio" name="{html.escape(otype)}" value="{html.escape(v)}"'
                         f'{checked}><label>{html.escape(v)}</label>')
    parts.append(f"<h2>{html.escape(p['Title'])}</h2><h4>Price: ${p['price']:.2f}</h4>"
                 "<h4>Rating: N.A.</h4>")
    opts = _q(repr(options))
    for sub in ("Description", "Features", "Reviews"):
        parts.append(_form(f"/item_sub_page/{_q(sid)}/{asin}/{kw}/{page}/{sub}/{opts}", sub))
    parts.append(_form(f"/done/{_q(sid)}/{asin}/{opts}", "Buy Now"))
    return _page("".join(parts), goal["instruction_text"])


def item_sub_page(sid: str, goal: dict, asin: str, keywords: str, page: int, sub: str,
                  options: dict) -> str:
    p = BY_ASIN[asin]
    kw = _q(keywords)
    body = {"Description": [p["Description"]], "Features": p["BulletPoints"],
            "Reviews": p["Reviews"], "Attributes": p["Attributes"]}[sub]
    parts = [_form(f"/{_q(sid)}", "Back to Search"),
             _form(f"/item_page/{_q(sid)}/{asin}/{kw}/{page}/{_q(repr(options))}", "< Prev")]
    parts += [f"<p>{html.escape(t)}</p>" for t in body]
    return _page("".join(parts), goal["instruction_text"])


def done_page(sid: str, asin: str, options: dict, reward: float) -> str:
    return ("<!DOCTYPE html><html><head><title>WebShop</title></head><body>"
            "<h1>Thank you for shopping with us!</h1>"
            f"<h3>Your code:</h3><p>{html.escape(sid)}</p><h3>Purchased</h3><p>{asin}</p>"
            f"<p>{html.escape(repr(options))}</p>"
            f"<h3>{SCORE_LABEL}</h3><p>{reward}</p></body></html>")


# --------------------------------------------------------------------------------- the server
def goal_for(session_id: str) -> dict:
    m = re.fullmatch(r"fixed_(\d+)", session_id)
    if m:
        i = int(m.group(1))
        if i >= len(GOALS):
            raise KeyError(f"no instruction {i} (this server has {len(GOALS)})")
        return GOALS[i]
    return GOALS[int(hashlib.sha256(session_id.encode()).hexdigest(), 16) % len(GOALS)]


def keywords_of(text: str) -> list[str]:
    if text.startswith("["):
        return [str(k) for k in ast.literal_eval(text)]
    return text.lower().split()


class Handler(BaseHTTPRequestHandler):
    server_version = "WebShopFixture/1"
    purchases: dict[str, dict] = {}
    lock = threading.Lock()

    def log_message(self, fmt, *args):  # quiet; the runtime keeps the service log
        pass

    def _send(self, status: int, body: str, headers: dict | None = None) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):  # noqa: N802 - http.server naming
        self.do_GET()

    def do_GET(self):  # noqa: N802
        parts = path_segments(self.path)       # the same parsing as the agent's gateway
        try:
            self._send(200, *self.route(parts)) if parts else \
                self._send(302, "", {"Location": "/abc"})
        except (KeyError, ValueError, SyntaxError, IndexError) as exc:
            self._send(404, f"<html><body><p>not found: {html.escape(str(exc))}</p></body></html>")

    def route(self, parts: list[str]) -> tuple[str]:
        head = parts[0]
        if head == "health" and len(parts) == 1:
            return ("ok",)
        if len(parts) == 1:
            return (start_page(head, goal_for(head)),)
        if head == "search_results" and len(parts) == 4:
            sid, kw, page = parts[1:]
            return (results_page(sid, goal_for(sid), keywords_of(kw), int(page)),)
        if head == "item_page" and len(parts) == 6:
            sid, asin, kw, page, opts = parts[1:]
            return (item_page(sid, goal_for(sid), asin, " ".join(keywords_of(kw)), int(page),
                              ast.literal_eval(opts)),)
        if head == "item_sub_page" and len(parts) == 7:
            sid, asin, kw, page, sub, opts = parts[1:]
            if sub not in SUB_PAGES:
                raise KeyError(sub)
            return (item_sub_page(sid, goal_for(sid), asin, " ".join(keywords_of(kw)), int(page),
                                  sub, ast.literal_eval(opts)),)
        if head == "done" and len(parts) == 4:
            sid, asin, opts = parts[1:]
            options = ast.literal_eval(opts)
            product, goal = BY_ASIN[asin], goal_for(sid)
            reward, info = get_reward(product, goal, product["price"], options)
            with self.lock:
                self.purchases[sid] = {"asin": asin, "options": options, "reward": reward}
            return (done_page(sid, asin, options, reward),)
        raise KeyError("/".join(parts))


class _Server(ThreadingHTTPServer):
    request_queue_size = 128        # many episodes connect at once (the default is 5)


def make_server(port: int = 0, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    server = _Server((host, port), Handler)
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=3000)
    ap.add_argument("--host", default="127.0.0.1")
    args = ap.parse_args(argv)
    server = make_server(args.port, args.host)
    print(f"webshop fixture listening on http://{args.host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
