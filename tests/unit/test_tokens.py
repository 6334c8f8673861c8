"""Reading bearer tokens from ``FENCEPOST_TOKENS`` and from token files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fencepost.api.auth import (
    TOKENS_ENV,
    Principal,
    Scope,
    load_tokens,
    parse_env_tokens,
    parse_token_file,
)

ADMIN_TOKEN = "admin-token-0123456789"
CI_TOKEN = "ci-submitter-0123456789"


def principal(name: str, *scopes: Scope) -> Principal:
    return Principal(name=name, scopes=frozenset(scopes))


# -- FENCEPOST_TOKENS ----------------------------------------------------------------


def test_env_tokens() -> None:
    text = f" {ADMIN_TOKEN} = admin ; {CI_TOKEN}=submit, read ;"
    assert parse_env_tokens(text) == {
        ADMIN_TOKEN: principal("env-1", Scope.ADMIN),
        CI_TOKEN: principal("env-2", Scope.SUBMIT, Scope.READ),
    }


def test_env_token_may_end_in_base64_padding() -> None:
    assert parse_env_tokens("c2VjcmV0LXNlY3JldC1zZWNyZXQ==read") == {
        "c2VjcmV0LXNlY3JldC1zZWNyZXQ=": principal("env-1", Scope.READ)
    }


def test_env_tokens_empty_is_no_tokens() -> None:
    assert parse_env_tokens(" ; ") == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(f"{ADMIN_TOKEN}=root", "entry 1: unknown scope 'root'", id="unknown-scope"),
        pytest.param(f"{ADMIN_TOKEN}=", "entry 1: unknown scope ''", id="empty-scope"),
        pytest.param(f"{ADMIN_TOKEN}", "entry 1: expected token=scope", id="no-equals"),
        pytest.param("short=admin", "entry 1: a token must be at least 16", id="short-token"),
        pytest.param(
            f"{ADMIN_TOKEN}=admin;{CI_TOKEN}=submit,wrok",
            "entry 2: unknown scope 'wrok'",
            id="second-entry",
        ),
    ],
)
def test_env_tokens_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{TOKENS_ENV} {message}"):
        parse_env_tokens(text)


def test_a_token_of_exactly_16_characters_is_enough() -> None:
    assert parse_env_tokens("0123456789abcdef=read") == {
        "0123456789abcdef": principal("env-1", Scope.READ)
    }
    with pytest.raises(ValueError, match="at least 16"):
        parse_env_tokens("0123456789abcde=read")


# -- token files -------------------------------------------------------------------------

YAML = f"""\
tokens:
  - name: ops
    token: {ADMIN_TOKEN}
    scopes: [admin]
  - token: {CI_TOKEN}   # no name: token-2
    scopes:
      - submit
      - read
"""


def test_yaml_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens.yaml"
    path.write_text(YAML, encoding="utf-8")
    assert parse_token_file(path) == {
        ADMIN_TOKEN: principal("ops", Scope.ADMIN),
        CI_TOKEN: principal("token-2", Scope.SUBMIT, Scope.READ),
    }


def test_json_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(
        json.dumps({"tokens": [{"name": "w", "token": CI_TOKEN, "scopes": ["work"]}]}),
        encoding="utf-8",
    )
    assert parse_token_file(path) == {CI_TOKEN: principal("w", Scope.WORK)}


def entry(**fields: object) -> str:
    return json.dumps({"tokens": [fields]})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            entry(token=ADMIN_TOKEN, scopes=["root"]),
            "tokens[0].scopes: unknown scope 'root'",
            id="unknown-scope",
        ),
        pytest.param(
            entry(token=ADMIN_TOKEN, scopes=[]),
            "tokens[0].scopes: a token needs at least one scope",
            id="empty-scopes",
        ),
        pytest.param(
            entry(token=ADMIN_TOKEN, scopes="admin"),
            "tokens[0].scopes: expected a list",
            id="scopes-not-a-list",
        ),
        pytest.param(entry(token=ADMIN_TOKEN), "tokens[0].scopes: expected a list", id="no-scopes"),
        pytest.param(
            entry(token="short", scopes=["admin"]),
            "tokens[0]: a token must be at least 16 characters",
            id="short-token",
        ),
        pytest.param(
            entry(name="x", scopes=["admin"]),
            "tokens[0]: expected a mapping with a 'token' string",
            id="no-token",
        ),
        pytest.param(
            entry(token=1234567890123456789, scopes=["admin"]),
            "tokens[0]: expected a mapping with a 'token' string",
            id="token-not-a-string",
        ),
        pytest.param(
            json.dumps({"tokens": ["just-a-string-token"]}),
            "tokens[0]: expected a mapping",
            id="entry-not-a-mapping",
        ),
        pytest.param("{}", "expected a 'tokens' list", id="missing-tokens"),
        pytest.param("tokens: admin", "expected a 'tokens' list", id="tokens-not-a-list"),
        pytest.param("", "expected a 'tokens' list", id="empty-file"),
        pytest.param("- a\n- b\n", "expected a 'tokens' list", id="top-level-list"),
        pytest.param("tokens: [unclosed", "cannot read tokens", id="not-yaml"),
    ],
)
def test_token_file_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "tokens.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="^" + re.escape(f"{path}: {message}")):
        parse_token_file(path)


def test_unreadable_token_file_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ValueError, match="^" + re.escape(f"{missing}: cannot read tokens")):
        parse_token_file(missing)
    with pytest.raises(ValueError, match="^" + re.escape(f"{tmp_path}: cannot read tokens")):
        parse_token_file(tmp_path)  # a directory


def test_token_file_that_is_not_utf8_names_it(tmp_path: Path) -> None:
    path = tmp_path / "tokens.yaml"
    path.write_bytes(b"tokens: [\xff\xfe]")
    with pytest.raises(ValueError, match="^" + re.escape(f"{path}: cannot read tokens")):
        parse_token_file(path)


# -- load_tokens -------------------------------------------------------------------------


def test_load_tokens_merges_file_and_environment(tmp_path: Path) -> None:
    path = tmp_path / "tokens.yaml"
    path.write_text(YAML, encoding="utf-8")
    # The environment wins for a token both name: it is the later, more local setting.
    tokens = load_tokens(path, {TOKENS_ENV: f"{CI_TOKEN}=work"})
    assert tokens == {
        ADMIN_TOKEN: principal("ops", Scope.ADMIN),
        CI_TOKEN: principal("env-1", Scope.WORK),
    }


def test_load_tokens_without_file_or_variable_is_auth_off() -> None:
    assert load_tokens(None, {}) == {}
    assert load_tokens(None, {TOKENS_ENV: "  "}) == {}


def test_load_tokens_reads_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKENS_ENV, f"{ADMIN_TOKEN}=admin")
    assert load_tokens() == {ADMIN_TOKEN: principal("env-1", Scope.ADMIN)}


def test_load_tokens_refuses_a_bad_variable_even_with_a_good_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens.yaml"
    path.write_text(YAML, encoding="utf-8")
    with pytest.raises(ValueError, match=f"^{TOKENS_ENV} entry 1: unknown scope"):
        load_tokens(path, {TOKENS_ENV: f"{CI_TOKEN}=everything"})


def test_load_tokens_refuses_a_bad_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens.yaml"
    path.write_text("tokens: nope\n", encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(str(path))):
        load_tokens(path, {})
