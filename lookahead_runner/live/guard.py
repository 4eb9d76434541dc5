"""Who reaches the live view, and where its load goes: the claim is that a page of another site (or of another port
of this host) can neither read nor drive it, that with the sweep's token nobody without the printed address can, and
that its load and scrapes go to the server the life started, whatever a form says.

Locust's web UI (bound to 127.0.0.1 by the runner: run/life/load.py) answers without a login and with CORS headers that
echo any Origin. On it, before any route answers:
- a request whose Origin is not the web UI's own, or that a browser marks as sent from another site
  (Sec-Fetch-Site; a top-level navigation aside), is refused, and no answer carries CORS headers;
- a Host header that is not a loopback name is refused (a DNS name of an attacker's rebound to 127.0.0.1: the
  browser calls that page same-origin);
- with the sweep's token (contracts/auth.py LIVE_TOKEN_ENV, which the runner prints in the live view's address),
  every route needs it: given once in the address, it is kept in a cookie for the page's own requests (HttpOnly,
  SameSite=Strict), so the /swarm and /stop buttons still work and nothing else does;
- a /swarm whose form names another host is refused: the load's key goes to the server the life started only.
"""
from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from flask import Response, make_response, request

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
TOKEN_PARAM = "token"
COOKIE_PREFIX = "lookahead_live_"   # and the port: a browser keeps cookies per host, not per port
SWARM_PATH = "/swarm"
CROSS_SITE = frozenset({"cross-site", "same-site"})  # Sec-Fetch-Site values of a request from another origin
HARDENING = {"Referrer-Policy": "no-referrer",        # the token in the address goes nowhere else
             "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff"}


@dataclass(frozen=True)
class Asked:
    """What a request says about where it comes from (the parts of a Flask request the rules read)."""

    method: str
    path: str
    scheme: str
    host: str
    headers: Mapping[str, str]
    token: str = ""          # from the address, else the cookie
    form_host: str | None = None


@dataclass(frozen=True)
class Rules:
    server_url: str          # the server the life started: the only host a /swarm may name
    token: str = ""          # "" = no token asked (Locust run by hand, not by the runner)
    base: str = ""           # Locust's --web-base-path


def refusal(asked: Asked, rules: Rules) -> str:
    """Why this request is refused (one line), or ""."""
    hostname = urlsplit(f"//{asked.host}").hostname or ""
    if hostname not in LOOPBACK_NAMES:
        return f"refused: the live view answers on this machine's loopback address only, not as {asked.host}"
    origin = asked.headers.get("Origin")
    if origin is not None and origin != f"{asked.scheme}://{asked.host}":
        return "refused: a request from another origin"
    navigation = asked.method == "GET" and asked.headers.get("Sec-Fetch-Mode") == "navigate"
    if asked.headers.get("Sec-Fetch-Site") in CROSS_SITE and not navigation:
        return "refused: a request from another site"
    if rules.token and not hmac.compare_digest(asked.token.encode(), rules.token.encode()):
        return "refused: open the live view at the address the runner printed (it carries the sweep's token)"
    if asked.method == "POST" and asked.path == rules.base + SWARM_PATH and asked.form_host is not None \
            and _same_url(asked.form_host) != _same_url(rules.server_url):
        return f"refused: this load runs against {rules.server_url} only, the server its life started"
    return ""


def _same_url(url: str) -> str:
    return url.strip().rstrip("/")


def install(web_ui, server_url: str, token: str) -> None:
    """The rules above on every route of this web UI (its own and the live view's)."""
    app = web_ui.app
    rules = Rules(server_url, token, (getattr(web_ui.environment.parsed_options, "web_base_path", "") or "").rstrip("/"))
    cookie = f"{COOKIE_PREFIX}{web_ui.port}"

    @app.before_request
    def refuse() -> Response | None:
        why = refusal(Asked(request.method, request.path, request.scheme, request.host, request.headers,
                            request.args.get(TOKEN_PARAM) or request.cookies.get(cookie, ""),
                            request.form.get("host") if request.path == rules.base + SWARM_PATH else None), rules)
        if why:
            return make_response(why + "\n", 403, {"Content-Type": "text/plain; charset=utf-8"})
        return None

    def harden(response: Response) -> Response:
        for name in [name for name in response.headers.keys() if name.lower().startswith("access-control-")]:
            del response.headers[name]
        response.headers.update(HARDENING)
        given = request.args.get(TOKEN_PARAM, "")
        if rules.token and given and hmac.compare_digest(given.encode(), rules.token.encode()):
            response.set_cookie(cookie, rules.token, httponly=True, samesite="Strict", path="/")
        return response

    # after_request functions run last-registered first: at the front of the list, this one runs after Locust's CORS
    app.after_request_funcs.setdefault(None, []).insert(0, harden)
