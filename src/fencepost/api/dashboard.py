"""The dashboard: one HTML page and its assets, and the sign-in session behind it.

The page (``static/``) is plain HTML, CSS and an ES module: no build step, no
third-party script, nothing loaded from elsewhere. It talks only to the JSON API,
with the session cookie, and sends the ``fencepost_csrf`` cookie's value back as
``X-CSRF-Token`` on every state-changing request (see :mod:`fencepost.api.auth`).

Everything here is served with a strict Content-Security-Policy: scripts and
styles only from this origin and never inline, so even a string that slipped
into the page as markup could not run.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable

from fastapi import APIRouter, Request, Response, status
from pydantic import BaseModel, ConfigDict, Field

from fencepost.api import problems as p
from fencepost.api.auth import (
    CSRF_COOKIE,
    SESSION_COOKIE,
    Auth,
    CredentialsRefused,
    check_csrf,
    csrf_token,
)
from fencepost.domain.errors import NotFound

router = APIRouter()

#: The media type of each kind of asset the page loads.
MEDIA_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}

_STATIC = resources.files("fencepost.api").joinpath("static")


def _listed(folder: Traversable, prefix: str = "") -> dict[str, str]:
    """Every asset under ``folder`` by its path below static/, with its media type."""
    found: dict[str, str] = {}
    for entry in folder.iterdir():
        if entry.is_dir():
            found |= _listed(entry, f"{prefix}{entry.name}/")
        elif (suffix := "." + entry.name.rpartition(".")[2]) in MEDIA_TYPES:
            found[prefix + entry.name] = MEDIA_TYPES[suffix]
    return found


#: The assets the page loads (``app.js`` and its modules under ``js/``, styles under
#: ``css/``, pinned third-party files under ``vendor/``), listed once at import, with
#: the media type each is served as. Anything else under /static is a 404: a request's
#: path is only ever a key of this table, it never reaches the file system.
ASSETS = _listed(_STATIC)

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)

#: Sent with the page and its assets (``nosniff`` is on every response: app.NoSniff).
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    # Small files: always revalidate, so a new release's page never meets an old script.
    "Cache-Control": "no-cache",
}


def _asset(name: str) -> bytes:
    return _STATIC.joinpath(name).read_bytes()


def _secure(request: Request) -> bool:
    # Only mark cookies Secure when the page came over TLS: on plain http (loopback,
    # the default bind) a Secure cookie would not be stored at all.
    return request.url.scheme == "https"


@router.get("/", include_in_schema=False)
def index(request: Request) -> Response:
    """The dashboard page; sets the CSRF cookie it will echo back, if the browser has none."""
    response = Response(
        _asset("index.html"), media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS
    )
    if not request.cookies.get(CSRF_COOKIE):
        # Readable by the page's script (not HttpOnly): that is how it echoes the value.
        response.set_cookie(
            CSRF_COOKIE,
            csrf_token(),
            path="/",
            samesite="strict",
            httponly=False,
            secure=_secure(request),
        )
    return response


@router.get("/static/{name:path}", include_in_schema=False)
def asset(name: str) -> Response:
    """One of the page's :data:`ASSETS`."""
    media_type = ASSETS.get(name)
    if media_type is None:
        raise NotFound(name, subject="asset")
    return Response(_asset(name), media_type=media_type, headers=SECURITY_HEADERS)


# -- sign-in session -----------------------------------------------------------------------


class SignIn(BaseModel):
    """The body of ``POST /session``: one of the configured bearer tokens."""

    model_config = ConfigDict(extra="forbid")

    token: str = Field(min_length=1, max_length=4096)


class Session(BaseModel):
    """Who the caller is: ``name`` is None when auth is on and nobody is signed in."""

    #: Whether the service checks credentials at all.
    auth: bool
    name: str | None
    scopes: list[str]


def _auth(request: Request) -> Auth:
    auth: Auth = request.app.state.auth
    return auth


@router.get("/session", response_model=Session)
def whoami(request: Request) -> Session:
    """The signed-in caller (by session cookie or bearer token), so the page knows to ask."""
    auth = _auth(request)
    try:
        principal, _ = auth.authenticate(request)
    except CredentialsRefused:
        return Session(auth=auth.enabled, name=None, scopes=[])
    return Session(
        auth=auth.enabled, name=principal.name, scopes=sorted(s.value for s in principal.scopes)
    )


@router.post(
    "/session",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=p.responses(p.VALIDATION, p.BODY_TOO_LARGE, p.UNAUTHORIZED, p.CSRF),
)
def sign_in(body: SignIn, request: Request) -> Response:
    """Exchange a token for an HttpOnly session cookie (204); an unknown token is a 401.

    This is a browser request like any other: it must pass the CSRF check, or a
    page elsewhere could sign the user's browser in as someone else. With auth
    off there is nothing to sign in to: 204, no cookie.
    """
    check_csrf(request)
    auth = _auth(request)
    response = Response(status_code=status.HTTP_204_NO_CONTENT)
    if not auth.enabled:
        return response
    principal = auth.token(body.token)
    if principal is None:
        refused = p.problem(p.UNAUTHORIZED, "token: unknown token", field="token")
        refused.headers["WWW-Authenticate"] = 'Bearer realm="fencepost"'
        return refused
    previous = request.cookies.get(SESSION_COOKIE)
    if previous:
        auth.close_session(previous)
    response.set_cookie(
        SESSION_COOKIE,
        auth.open_session(principal),
        path="/",
        samesite="strict",
        httponly=True,
        secure=_secure(request),
    )
    return response


@router.delete(
    "/session",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=p.responses(p.CSRF),
)
def sign_out(request: Request) -> Response:
    """Forget this browser's session and clear its cookie (204, signed in or not)."""
    check_csrf(request)
    session = request.cookies.get(SESSION_COOKIE)
    if session:
        _auth(request).close_session(session)
    response = Response(status_code=status.HTTP_204_NO_CONTENT)
    response.delete_cookie(
        SESSION_COOKIE, path="/", samesite="strict", httponly=True, secure=_secure(request)
    )
    return response
