"""Write ``reference/cli.md`` from ``fencepost.cli.main.build_parser()``.

Every command and subcommand, walked recursively from the real parser: its help,
its usage line and every argument with its help, choices and default. A new option
appears here at the next build, and ``tests/docs/test_site.py`` fails if one does not.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import mkdocs_gen_files

sys.path.insert(0, str(Path(__file__).parent))

from _markdown import GENERATED, cell, code, escape, slug

from fencepost.cli import common
from fencepost.cli.main import build_parser

#: Variables some defaults are read from when the parser is built: the reference shows
#: the defaults a fresh environment gets (each option's help names its variable).
ENVIRONMENT_DEFAULTS = ("FENCEPOST_DB", "FENCEPOST_TOKEN", "FENCEPOST_TOKENS")


@contextmanager
def clean_environment() -> Iterator[None]:
    saved = {name: os.environ.pop(name) for name in ENVIRONMENT_DEFAULTS if name in os.environ}
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "80"  # usage lines wrapped the same on every machine
    try:
        yield
    finally:
        os.environ.update(saved)
        if columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = columns


def commands(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[str, argparse.ArgumentParser, str]]:
    """Every (name, parser, one-line help) directly under ``parser``, in the order added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, sub, helps.get(name, "")


def arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's arguments, ``--help`` and subcommands left out."""
    return [
        action
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
    ]


def invocation(action: argparse.Action) -> str:
    if action.option_strings and action.nargs == 0:
        return ", ".join(action.option_strings)
    if action.metavar is not None:
        metavar = action.metavar if isinstance(action.metavar, str) else " ".join(action.metavar)
    elif action.choices is not None:
        metavar = "{" + ",".join(map(str, action.choices)) + "}"
    elif action.option_strings:
        metavar = action.dest.upper()
    else:
        metavar = action.dest
    if not action.option_strings:
        return {
            "?": f"[{metavar}]",
            "*": f"[{metavar} ...]",
            "+": f"{metavar} [{metavar} ...]",
        }.get(str(action.nargs), metavar)
    return ", ".join(f"{option} {metavar}" for option in action.option_strings)


def expanded_help(action: argparse.Action, prog: str) -> str:
    """The help text as ``--help`` prints it (``%(default)s`` and the like filled in)."""
    if not action.help or action.help is argparse.SUPPRESS:
        return ""
    params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
    params["prog"] = prog
    for key, value in list(params.items()):
        if hasattr(value, "__name__"):
            params[key] = value.__name__
    if params.get("choices") is not None:
        params["choices"] = ", ".join(map(str, params["choices"]))
    return action.help % params


def default_of(action: argparse.Action) -> str:
    if isinstance(action, argparse._VersionAction):
        return ""
    default = action.default
    if default is None or default is argparse.SUPPRESS or action.nargs == 0:
        return ""
    if isinstance(default, list | tuple) and not default:
        return ""
    return code(default)


def argument_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in arguments(parser):
        text = escape(expanded_help(action, parser.prog))
        if action.choices is not None and action.metavar is not None:
            text += " One of " + ", ".join(code(c) for c in action.choices) + "."
        if action.required:
            text = "Required. " + text
        if action.nargs in ("*", "+") or isinstance(action, argparse._AppendAction):
            text += " May be given more than once." if action.option_strings else ""
        rows.append(f"| {code(invocation(action))} | {default_of(action)} | {cell(text)} |")
    return rows


def section(name: str, parser: argparse.ArgumentParser, summary: str, level: int) -> list[str]:
    prog = parser.prog
    lines = [f"{'#' * level} `{prog}` {{#{slug(prog)}}}", ""]
    if summary:
        lines += [escape(summary[0].upper() + summary[1:]) + ".", ""]
    if parser.description and parser.description != summary:
        paragraphs = [" ".join(p.split()) for p in parser.description.split("\n\n")]
        lines += [escape(p) + "\n" for p in paragraphs if p]
    lines += ["```text", parser.format_usage().strip(), "```", ""]
    rows = argument_rows(parser)
    if rows:
        lines += ["| Argument | Default | Description |", "| --- | --- | --- |", *rows, ""]
    children = list(commands(parser))
    if children:
        lines += ["Subcommands:", ""]
        lines += [
            f"- [`{sub.prog}`](#{slug(sub.prog)}): {escape(help_)}" for _, sub, help_ in children
        ]
        lines.append("")
        for child_name, sub, help_ in children:
            lines += section(child_name, sub, help_, min(level + 1, 4))
    return lines


def exit_codes() -> list[str]:
    """The "Exit codes" section, from ``common.EXIT_CAUSES``: the table the commands use."""
    return [
        "## Exit codes {#exit-codes}",
        "",
        "Every command exits with one code per cause, the same in every command; a refusal "
        "is one line on stderr, `fencepost COMMAND: FIELD: reason`. A command given several "
        "ids (`cancel`, `replay`) carries on past one that fails and exits with the first "
        "failure's code.",
        "",
        "| Code | Name | Meaning |",
        "| --- | --- | --- |",
        *(
            f"| {int(code)} | `{code.name}` | {cell(escape(meaning))} |"
            for code, meaning in common.EXIT_CAUSES.items()
        ),
        "",
    ]


def page() -> str:
    with clean_environment():
        parser = build_parser()
        top = list(commands(parser))
        lines = [
            GENERATED.format(script="cli_reference.py"),
            "# Command line",
            "",
            "The `fencepost` command: the service, the worker, database migrations and the "
            "operator commands. This page is generated from the command's own parser, so it "
            "says exactly what `fencepost COMMAND --help` says. Defaults are those of an "
            "environment where `FENCEPOST_DB` and `FENCEPOST_TOKEN` are not set "
            "(see [Configuration](configuration.md)). Every command and subcommand also takes "
            "`-h`/`--help`.",
            "",
            escape(" ".join((parser.description or "").split())),
            "",
            "```text",
            parser.format_usage().strip(),
            "```",
            "",
            "| Argument | Default | Description |",
            "| --- | --- | --- |",
            *argument_rows(parser),
            "",
            *exit_codes(),
            "## Commands",
            "",
            "| Command | What it does |",
            "| --- | --- |",
            *(
                f"| [`{sub.prog}`](#{slug(sub.prog)}) | {cell(escape(help_))} |"
                for _, sub, help_ in top
            ),
            "",
        ]
        for name, sub, help_ in top:
            lines += section(name, sub, help_, 2)
    return "\n".join(lines).rstrip() + "\n"


with mkdocs_gen_files.open("reference/cli.md", "w") as out:
    out.write(page())
