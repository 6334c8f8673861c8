"""The keyword arguments a verb takes, whether it names them or unpacks a TypedDict."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any


def keywords(verb: Callable[..., Any]) -> set[str]:
    """The named parameters of ``verb`` (``self`` aside), and for ``**kwargs:
    Unpack[SomeTypedDict]`` the TypedDict's keys (other ``**kwargs`` add nothing)."""
    found = set()
    for parameter in inspect.signature(verb).parameters.values():
        if parameter.name == "self":
            continue
        if parameter.kind is parameter.VAR_KEYWORD:
            hint = typing.get_type_hints(verb, include_extras=True).get(parameter.name)
            if typing.get_origin(hint) is typing.Unpack:
                (typed,) = typing.get_args(hint)
                found |= set(typed.__annotations__)
            continue
        found.add(parameter.name)
    return found
