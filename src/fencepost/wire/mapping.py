"""The API's names for Python's, stated once, and the two base classes that apply them.

The API names a field as Python does (the store's verbs, ``App``, ``Client`` and
the domain models), with two differences:

* a duration travels as a number of seconds and its name says so: the field
  ``delay_seconds`` is the argument ``delay``, ``timeout_seconds`` the attribute
  ``timeout`` (a ``timedelta``). Where the name already says what it is (a lateness
  percentile, ``p50``), only the unit changes;
* the domain models keep a job's version as ``job_version``; the API, ``Store``,
  ``App`` and ``Client`` call the argument ``version``.

:class:`WireModel` is a response body that mirrors one domain type, both ways:
the API answers with ``Execution.from_domain(execution)`` and the client reads
``Execution.model_validate_json(text).to_domain()``. :class:`RequestModel` is a
request body that carries a verb's keyword arguments: the API calls the store with
``body.arguments()`` and the client sends ``SubmitRequest.body(arguments)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from functools import partial
from operator import attrgetter
from types import UnionType
from typing import (
    Any,
    ClassVar,
    Generic,
    Self,
    TypeVar,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
)

from pydantic import BaseModel, ConfigDict

from fencepost.domain import payloads
from fencepost.domain.errors import ValidationError

#: The suffix of a duration's name on the wire.
SECONDS = "_seconds"
#: Domain attributes named otherwise than the API's field (and the verbs' argument).
ATTRIBUTE_NAMES = {"version": "job_version"}


def argument_name(field: str) -> str:
    """The verbs' name for an API field: ``delay_seconds`` is ``delay``."""
    return field.removesuffix(SECONDS)


def attribute_name(field: str) -> str:
    """The domain attribute an API field mirrors: ``version`` is ``job_version``."""
    name = argument_name(field)
    return ATTRIBUTE_NAMES.get(name, name)


#: Types a JSON body holds as they are.
_AS_IS = frozenset({str, int, float, bool, dict, list, type(None)})


def json_value(value: Any) -> Any:
    """An argument as the client sends it: a duration in seconds, an enum member by its
    value, an instant in ISO 8601.

    An instant keeps its offset (or lack of one: the service refuses a naive time
    rather than guess its zone).
    """
    if type(value) in _AS_IS:  # most arguments: checked first, each costs a call per item
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Enum):
        return value.value
    return value


# -- response bodies -------------------------------------------------------------------------

D = TypeVar("D")
#: Turns one value into another (a body's into the domain's, or back).
Convert = Callable[[Any], Any]


class WireModel(BaseModel, Generic[D]):
    """A response body that mirrors the domain type ``D`` field by field (see the module doc).

    Fields of ``D`` the body does not carry get the values of :attr:`not_on_the_wire`
    (or those given to :meth:`to_domain`); fields of the body that ``D`` lacks are
    given to :meth:`from_domain`. A field holding another wire model (or a list of
    them) is converted with that model; the others by the domain field's type (see
    :func:`to_wire` and :func:`from_wire`), and :attr:`readable` payloads with
    ``payloads.readable``.
    """

    #: Values for the domain type's fields that this body does not carry.
    not_on_the_wire: ClassVar[Mapping[str, Any]] = {}
    #: Payload fields shown as a marker where they nest too deep (see ``payloads.readable``).
    readable: ClassVar[tuple[str, ...]] = ()
    #: The domain type, from the class's type argument.
    domain_type: ClassVar[type[Any]]
    #: Body field -> the domain attribute it mirrors (fields the domain type has).
    mirrored: ClassVar[dict[str, str]]
    # How values travel out (domain attribute -> body field) and in (field -> attribute).
    _out: ClassVar[_Out]
    _in: ClassVar[_In]

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        domain = _type_argument(cls)
        if domain is None:  # WireModel itself
            return
        cls.domain_type = domain
        hints = get_type_hints(domain)
        cls.mirrored = {
            field: attribute_name(field)
            for field in cls.model_fields
            if attribute_name(field) in hints
        }
        out: dict[str, tuple[str, Convert | None]] = {}
        into: dict[str, tuple[str, Convert | None]] = {}
        for field, attribute in cls.mirrored.items():
            model, many = _wire_model(cls.model_fields[field].annotation)
            if model is not None:
                out[field] = (attribute, _nested(model.from_domain, many))
                into[field] = (attribute, _nested(model.to_domain, many))
            else:
                readable = payloads.readable if field in cls.readable else None
                out[field] = (attribute, readable or to_wire(hints[attribute]))
                into[field] = (attribute, from_wire(hints[attribute]))
        left_out = tuple(field for field in cls.model_fields if field not in cls.mirrored)
        cls._out, cls._in = _Out.of(out), _In.of(into, left_out)

    @classmethod
    def from_domain(cls, obj: D, /, **given: Any) -> Self:
        """The body of a domain object; ``given`` fills (or replaces) fields by name."""
        values = cls._out(obj)
        if given:
            values.update(given)
        return cls.model_validate(values)

    def to_domain(self, **given: Any) -> D:
        """The domain object this body mirrors; ``given`` fills the fields it does not carry."""
        cls = type(self)
        values = cls._in(self)
        if cls.not_on_the_wire or given:
            values = {**cls.not_on_the_wire, **values, **given}
        return cast(D, cls.domain_type(**values))


# Bodies are built and read per item of a batch (claims, submits, pages): the two
# copies below do per body no more than what its values need.


@dataclass(frozen=True)
class _Out:
    """How a domain object's values become a body's: unchanged ones read in one call."""

    #: The fields the unchanged values go to, in the order ``read`` returns them.
    fields: tuple[str, ...]
    read: Callable[[Any], tuple[Any, ...]]
    #: (field, attribute, conversion) for the values that change.
    converted: tuple[tuple[str, str, Convert], ...]

    @classmethod
    def of(cls, plan: Mapping[str, tuple[str, Convert | None]]) -> _Out:
        """From ``field -> (attribute, conversion or None)``."""
        same = {field: attribute for field, (attribute, c) in plan.items() if c is None}
        converted = tuple((f, a, c) for f, (a, c) in plan.items() if c is not None)
        return cls(fields=tuple(same), read=_getter(same.values()), converted=converted)

    def __call__(self, obj: Any) -> dict[str, Any]:
        """The body's values for the domain object ``obj``, by field."""
        values = dict(zip(self.fields, self.read(obj), strict=True))
        for field, attribute, convert in self.converted:
            values[field] = convert(getattr(obj, attribute))
        return values


@dataclass(frozen=True)
class _In:
    """How a body's values become a domain object's: a copy of the body's, a few changed."""

    #: Fields the domain type does not have.
    left_out: tuple[str, ...]
    #: (field, attribute, conversion) for the values renamed or changed.
    changed: tuple[tuple[str, str, Convert], ...]

    @classmethod
    def of(cls, plan: Mapping[str, tuple[str, Convert | None]], left_out: tuple[str, ...]) -> _In:
        """From ``field -> (attribute, conversion or None)`` and the fields left out."""
        changed = tuple(
            (field, attribute, convert or _same)
            for field, (attribute, convert) in plan.items()
            if convert is not None or field != attribute
        )
        return cls(left_out=left_out, changed=changed)

    def __call__(self, body: BaseModel) -> dict[str, Any]:
        """The domain values of ``body``, by attribute."""
        values = dict(body.__dict__)  # pydantic keeps a model's field values there
        for field in self.left_out:
            del values[field]
        for field, attribute, convert in self.changed:
            values[attribute] = convert(values.pop(field))
        return values


def _wire_model(annotation: Any) -> tuple[Any, bool]:
    """The wire model a field holds (or holds a list of), and whether a list; else None."""
    many = get_origin(annotation) is list
    if many:
        [annotation] = get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, WireModel):
        return annotation, many
    return None, False


def _nested(convert: Convert, many: bool) -> Convert:
    """A nested body's conversion (each item's, for a list); None passes through."""
    if many:
        return lambda items: None if items is None else [convert(item) for item in items]
    return lambda item: None if item is None else convert(item)


def to_wire(hint: Any) -> Convert | None:
    """How a domain value of type ``hint`` goes into a body; None where it goes as it is.

    A duration goes in seconds, an enum member by its value, a mapping with them
    converted (keys too). Every conversion passes None through.
    """
    hint = _not_none(hint)
    if hint is timedelta:
        return _seconds
    if isinstance(hint, type) and issubclass(hint, Enum):
        return _value
    if get_origin(hint) is dict:
        return _mapping(*(to_wire(arg) for arg in get_args(hint)))
    return None


def from_wire(hint: Any) -> Convert | None:
    """How a body's value becomes a domain value of type ``hint``; None where it is one.

    The reverse of :func:`to_wire`; a list becomes a tuple where the domain holds
    one, and an instant the aware UTC ``datetime`` the store hands out (pydantic
    would give it an offset of its own type). Every conversion passes None through.
    """
    hint = _not_none(hint)
    if hint is timedelta:
        return _duration
    if hint is datetime:
        return _in_utc
    if isinstance(hint, type) and issubclass(hint, Enum):
        return partial(_member, hint)
    if get_origin(hint) is tuple:
        return _tuple
    if get_origin(hint) is dict:
        return _mapping(*(from_wire(arg) for arg in get_args(hint)))
    return None


def _not_none(hint: Any) -> Any:
    """``X`` of the hint ``X | None`` (no other union is a domain field's type), else ``hint``."""
    if get_origin(hint) in (Union, UnionType):
        [hint] = [arg for arg in get_args(hint) if arg is not type(None)]
    return hint


# One small function a conversion, each passing None through: they run per field of
# every body a batch holds, where a wrapper's call would double their cost.


def _seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


def _duration(seconds: float | None) -> timedelta | None:
    return None if seconds is None else timedelta(seconds=seconds)


def _value(member: Enum | None) -> Any:
    return None if member is None else member.value


def _member(enum: type[Enum], value: Any) -> Enum | None:
    return None if value is None else enum(value)


def _in_utc(instant: datetime | None) -> datetime | None:
    return None if instant is None else instant.astimezone(UTC)


def _tuple(items: list[Any] | None) -> tuple[Any, ...] | None:
    return None if items is None else tuple(items)


def _mapping(key: Convert | None, value: Convert | None) -> Convert | None:
    """A mapping's conversion from its keys' and values' (None: neither changes)."""
    if key is None and value is None:
        return None
    keys, values = key or _same, value or _same
    return lambda mapping: (
        None if mapping is None else {keys(k): values(v) for k, v in mapping.items()}
    )


def _same(value: Any) -> Any:
    return value


def _type_argument(cls: type[WireModel[Any]]) -> type[Any] | None:
    """The ``D`` of ``class X(WireModel[D])`` (inherited by X's subclasses)."""
    for klass in cls.__mro__:
        metadata = getattr(klass, "__pydantic_generic_metadata__", None)
        if metadata and metadata["origin"] is WireModel and metadata["args"]:
            return cast(type[Any], metadata["args"][0])
    return None


def _getter(names: Iterable[str]) -> Callable[[Any], tuple[Any, ...]]:
    """A function reading these attributes off an object, as a tuple."""
    names = tuple(names)
    if len(names) > 1:
        return attrgetter(*names)
    # attrgetter wants a name, and of one name returns the value, not a tuple.
    return lambda obj: tuple(getattr(obj, name) for name in names)


# -- request bodies --------------------------------------------------------------------------


class RequestModel(BaseModel):
    """Request bodies refuse unknown fields: a typo must not silently do nothing."""

    model_config = ConfigDict(extra="forbid")

    #: A null in this body clears the field (a PATCH); elsewhere a null is "not given".
    null_clears: ClassVar[bool] = False
    # Field -> the verbs' argument name, and back: a batch submit maps every item's
    # fields, so the names are worked out once.
    _store_names: ClassVar[dict[str, str]] = {}
    _fields: ClassVar[dict[str, str]] = {}

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._store_names = {field: argument_name(field) for field in cls.model_fields}
        cls._fields = {argument_name(field): field for field in cls.model_fields}

    def arguments(self) -> dict[str, Any]:
        """The store verb's keyword arguments this body carries, by the store's names.

        Every field with a value; a null only where it clears the field, and then
        only if the request gave it (a PATCH changes what it names, nothing else).
        """
        names = self._store_names
        if self.null_clears:
            return {names[f]: getattr(self, f) for f in self.model_fields_set}
        # pydantic keeps a model's field values in its __dict__
        return {names[f]: value for f, value in self.__dict__.items() if value is not None}

    @classmethod
    def body(cls, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The JSON body that carries these keyword arguments (by the verbs' names).

        A name that is not one of this body's is sent as it is, for the service to
        refuse naming it. Nulls are left out unless they clear the field. A number
        JSON cannot carry (NaN, an infinity) is refused here, naming the field: a
        :class:`ValidationError`, as the service would answer.
        """
        fields = cls._fields
        body = {}
        for name, value in arguments.items():
            if value is None and not cls.null_clears:
                continue
            field = fields.get(name, name)
            sent = json_value(value)
            if type(sent) is float and not math.isfinite(sent):
                raise ValidationError(field, f"must be a finite number, got {sent!r}")
            body[field] = sent
        return body

    @classmethod
    def api_field(cls, name: str) -> str:
        """The API's name for a field the store named in an error (``every``: ``every_seconds``)."""
        for field, stored in cls._store_names.items():
            if name in (stored, attribute_name(field)):
                return field
        return name
