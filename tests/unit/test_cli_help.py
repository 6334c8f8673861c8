"""A command's help is its handler's docstring: the listed line, then the description."""

from __future__ import annotations

import argparse

import pytest

from fencepost.cli import common
from fencepost.cli.main import main
from fencepost.cli.output import Output


def _parser() -> tuple[
    argparse.ArgumentParser, argparse._SubParsersAction[argparse.ArgumentParser]
]:
    parser = common.Parser(prog="fencepost")
    return parser, parser.add_subparsers(dest="command")


def test_the_first_paragraph_is_the_help_line_and_the_rest_the_description() -> None:
    def handler(args: argparse.Namespace, out: Output) -> int:
        """do a thing
        to 100% of everything

        First paragraph of the long text.

        Second, with 50% more.
        """
        return 0

    parser, commands = _parser()
    p = common.command(commands, "thing", handler)
    assert p.description == "First paragraph of the long text. Second, with 50% more."
    assert "Second, with 50% more." in " ".join(p.format_help().split())
    listed = " ".join(parser.format_help().split())
    assert "thing do a thing to 100% of everything" in listed
    assert p.get_default("handler") is handler


def test_a_one_line_docstring_is_both_help_and_description() -> None:
    def handler(args: argparse.Namespace, out: Output) -> int:
        """list them all"""
        return 0

    _, commands = _parser()
    assert common.command(commands, "ls", handler).description == "list them all"


def test_a_handler_without_a_docstring_is_refused_when_registered() -> None:
    def handler(args: argparse.Namespace, out: Output) -> int:
        return 0

    _, commands = _parser()
    with pytest.raises(TypeError, match="handler has no docstring"):
        common.command(commands, "bare", handler)


def test_the_slo_description_shows_its_targets_as_percentages(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["slo", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(target 99%), the share reaching SUCCEEDED or FAILED" in text
    assert "%%" not in text
