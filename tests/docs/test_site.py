"""The documentation site: it builds with ``--strict``, loads nothing from another host,
and its generated pages and pictures say what the code says.

One build per test run (``site``, on the one worker of their xdist group), into a
temporary directory, exactly as ``make docs`` does it.
"""

from __future__ import annotations

import argparse
import html
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from fencepost.cli.main import build_parser
from fencepost.domain.states import State

ROOT = Path(__file__).parents[2]
MKDOCS = Path(sys.executable).with_name("mkdocs")

# One worker runs them all, so the site (a module fixture, ~20 s) is built once a run.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("site")]

#: Attributes whose value the browser loads or navigates to.
URL_ATTRIBUTES = frozenset(
    {"href", "src", "srcset", "action", "formaction", "poster", "data", "xlink:href", "background"}
)
#: A URL with a scheme (``https:``) or a host (``//cdn``): anything but a path in the site.
ABSOLUTE = re.compile(r"^\s*(?:[a-zA-Z][a-zA-Z0-9+.-]*:|//)")
CSS_URL = re.compile(r"""url\(\s*['"]?([^'")]+)""")
CSS_IMPORT = re.compile(r"""@import\s+(?:url\()?\s*['"]?([^'");\s]+)""")
#: A call whose first argument is an http(s) URL: a script loaded, a fetch, an import.
JS_LOAD = re.compile(r"""[A-Za-z_$][\w$.]*\(\s*["'`](https?://[^"'`]+)""")
JS_ASSIGNED = re.compile(r"""\b(?:src|href)\s*[:=]\s*["'`](https?://[^"'`]+)""")

#: What the theme's script bundle can load from a CDN, and why no page of ours ever does.
THEME_LOADS = {
    # Diagrams of ```mermaid blocks made by a custom fence; mkdocs.yml configures none, and
    # test_no_page_asks_for_the_theme_s_cdn_scripts checks that no page has one.
    "https://unpkg.com/mermaid@11/dist/mermaid.min.js",
    # Only in a browser without ResizeObserver (every current one has it).
    "https://unpkg.com/resize-observer-polyfill",
}


@pytest.fixture(scope="session")  # a module's fixture is built again when xdist interleaves
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    for name in ("FENCEPOST_DB", "FENCEPOST_TOKEN", "FENCEPOST_TOKENS"):
        env.pop(name, None)
    run = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, f"mkdocs build --strict failed:\n{run.stderr[-6000:]}"
    return out


class _References(HTMLParser):
    """Every URL an HTML or SVG document loads or links to, and its inline CSS."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.urls: list[str] = []
        self.css: list[str] = []
        self.scripts: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in URL_ATTRIBUTES:
                parts = value.split(",") if name == "srcset" else [value]
                self.urls += [part.strip().split(" ")[0] for part in parts]
            elif name == "style":
                self.css.append(value)
        self._in = tag if tag in ("style", "script") else None

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "style":
            self.css.append(data)
        elif self._in == "script":
            self.scripts.append(data)


def _external_in_css(text: str) -> list[str]:
    found = CSS_URL.findall(text) + CSS_IMPORT.findall(text)
    return [url for url in found if ABSOLUTE.match(url) and not url.startswith("data:")]


def _external_in_js(text: str) -> list[str]:
    return JS_LOAD.findall(text) + JS_ASSIGNED.findall(text)


def test_no_page_picture_or_stylesheet_refers_to_another_host(site: Path) -> None:
    offending: list[str] = []
    documents = [*site.rglob("*.html"), *site.rglob("*.svg")]
    assert len(documents) > 30
    for path in documents:
        parser = _References()
        parser.feed(path.read_text(encoding="utf-8"))
        where = path.relative_to(site)
        for url in parser.urls:
            if ABSOLUTE.match(url) and not url.startswith(("data:", "#")):
                offending.append(f"{where}: {url}")
        for css in parser.css:
            offending += [f"{where} (CSS): {url}" for url in _external_in_css(css)]
        for script in parser.scripts:
            offending += [f"{where} (script): {url}" for url in _external_in_js(script)]
    for path in site.rglob("*.css"):
        text = path.read_text(encoding="utf-8")
        offending += [f"{path.relative_to(site)}: {url}" for url in _external_in_css(text)]
    assert offending == []


def test_scripts_load_nothing_from_another_host_but_the_theme_s_unused_fallbacks(
    site: Path,
) -> None:
    loads: dict[str, set[str]] = {}
    for path in site.rglob("*.js"):
        for url in _external_in_js(path.read_text(encoding="utf-8")):
            loads.setdefault(url, set()).add(str(path.relative_to(site)))
    assert set(loads) <= THEME_LOADS, loads
    # The offline plugin's Web Worker shim is served by the site itself, not a CDN.
    assert (site / "assets" / "javascripts" / "iframe-worker-shim.js").is_file()


def test_no_page_asks_for_the_theme_s_cdn_scripts(site: Path) -> None:
    for path in site.rglob("*.html"):
        text = path.read_text(encoding="utf-8")
        assert 'class="mermaid"' not in text, path  # would make the theme load mermaid
        assert "iframe-worker-shim.js" in text, path  # the shim, from the site


def test_the_state_machine_picture_names_every_state(site: Path) -> None:
    svg = (site / "images" / "state-machine.svg").read_text(encoding="utf-8")
    assert svg.lstrip().startswith("<svg")
    for state in State:
        assert f">{state.value}</text>" in svg, state


def test_the_lease_timeline_shows_both_epochs_and_the_refused_completion(site: Path) -> None:
    svg = (site / "images" / "lease-timeline.svg").read_text(encoding="utf-8")
    text = html.unescape(re.sub(r"<[^>]+>", " ", svg))
    assert "epoch 1: lease until t=15" in text
    assert "epoch 2: lease until t=20 (takeover)" in text
    assert "t=16: complete with epoch 1: refused (StaleLease)" in text
    assert "t=16: complete with epoch 2: SUCCEEDED" in text
    assert "t=15: epoch 1's lease expires" in text
    assert {"worker-a", "worker-b"} <= set(text.split())


def _parsers(
    parser: argparse.ArgumentParser,
) -> list[argparse.ArgumentParser]:
    """``parser`` and every subcommand's parser under it, depth first."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _parsers(sub)
    return found


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def test_the_cli_reference_names_every_command_and_option_of_the_parser(site: Path) -> None:
    page = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    parsers = _parsers(build_parser())
    assert len(parsers) > 20  # the walk found the subcommands
    # Each command's section runs from its heading to the next command's heading.
    starts = {}
    for sub in parsers[1:]:
        match = re.search(rf'<h[2-4] id="{_slug(sub.prog)}"', page)
        assert match, f"no section for {sub.prog}"
        starts[sub.prog] = match.start()
    bounds = [*sorted(starts.values()), len(page)]
    top = page[: bounds[0]]
    for parser in parsers:
        if parser is parsers[0]:
            section = top
        else:
            begin = starts[parser.prog]
            section = page[begin : next(b for b in bounds if b > begin)]
        text = html.unescape(re.sub(r"<[^>]+>", "", section))
        if parser is not parsers[0]:
            assert parser.prog in text
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            names = action.option_strings or [action.metavar or action.dest]
            for name in names:
                assert re.search(rf"(?<![\w-]){re.escape(str(name))}(?![\w-])", text), (
                    f"{parser.prog}: {name} missing from its section of reference/cli.md"
                )
