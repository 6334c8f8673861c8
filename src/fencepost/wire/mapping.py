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

import dataclasses
from collections.abc import Mapping
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, ClassVar, Generic, Self, TypeVar, cast, get_args, get_origin

from pydantic import BaseModel, ConfigDict, TypeAdapter

#: The suffix of a duration's name on the wire.
SECONDS = "_seconds"
#: Domain attributes named otherwise than the API's field (and the verbs' argument).
ATTRIBUTE_NAMES = {"version": "job_version"}
#: Arguments that the store's verbs still name otherwise than the API, ``App`` and
#: ``Client``: ``Store.submit``, ``submit_many`` and the schedule verbs take the
#: version as ``job_version``.
STORE_NAMES = {"version": "job_version"}


def argument_name(field: str) -> str:
    """The verbs' name for an API field: ``delay_seconds`` is ``delay``."""
    return field.removesuffix(SECONDS)


def store_name(field: str) -> str:
    """The store's argument name for an API field (see :data:`STORE_NAMES`)."""
    name = argument_name(field)
    return STORE_NAMES.get(name, name)


def attribute_name(field: str) -> str:
    """The domain attribute an API field mirrors: ``version`` is ``job_version``."""
    name = argument_name(field)
    return ATTRIBUTE_NAMES.get(name, name)


def wire_value(value: Any) -> Any:
    """A domain value as a body holds it: a duration in seconds, an enum member by value."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Enum):
        return value.value
    return value


def json_value(value: Any) -> Any:
    """An argument as the client sends it: :func:`wire_value`, and instants as ISO 8601.

    An instant keeps its offset (or lack of one: the service refuses a naive time
    rather than guess its zone).
    """
    return value.isoformat() if isinstance(value, datetime) else wire_value(value)


# -- response bodies -------------------------------------------------------------------------

D = TypeVar("D")


class WireModel(BaseModel, Generic[D]):
    """A response body that mirrors the domain type ``D`` field by field (see the module doc).

    Fields of ``D`` the body does not carry get the values of :attr:`not_on_the_wire`
    (or those given to :meth:`to_domain`); fields of the body that ``D`` lacks are
    given to :meth:`from_domain`. A field holding another wire model (or a list of
    them) is converted with that model.
    """

    #: Values for the domain type's fields that this body does not carry.
    not_on_the_wire: ClassVar[Mapping[str, Any]] = {}
    #: The domain type, from the class's type argument.
    domain_type: ClassVar[type[Any]]
    #: Body field -> the domain attribute it mirrors (fields the domain type has).
    mirrored: ClassVar[dict[str, str]]
    #: Body fields that hold a wire model, or a list of them: field -> (model, is a list).
    #: (The model is typed ``Any``: pydantic reads this annotation while it builds the
    #: class, before ``WireModel[...]`` can be written.)
    nested: ClassVar[dict[str, tuple[Any, bool]]]

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        domain = _type_argument(cls)
        if domain is None:  # WireModel itself
            return
        cls.domain_type = domain
        attributes = _field_names(domain)
        cls.mirrored = {
            field: attribute_name(field)
            for field in cls.model_fields
            if attribute_name(field) in attributes
        }
        cls.nested = {}
        for field, info in cls.model_fields.items():
            annotation, many = info.annotation, get_origin(info.annotation) is list
            if many:
                [annotation] = get_args(annotation)
            if isinstance(annotation, type) and issubclass(annotation, WireModel):
                cls.nested[field] = (annotation, many)

    @classmethod
    def from_domain(cls, obj: D, /, **given: Any) -> Self:
        """The body of a domain object; ``given`` fills (or replaces) fields by name."""
        values = dict(given)
        for field, attribute in cls.mirrored.items():
            if field in values:
                continue
            value = getattr(obj, attribute)
            if field in cls.nested and value is not None:
                model, many = cls.nested[field]
                value = [model.from_domain(v) for v in value] if many else model.from_domain(value)
            values[field] = wire_value(value)
        return cls.model_validate(values)

    def to_domain(self, **given: Any) -> D:
        """The domain object this body mirrors; ``given`` fills the fields it does not carry."""
        values = dict(self.not_on_the_wire)
        for field, attribute in self.mirrored.items():
            value = getattr(self, field)
            if field in self.nested and value is not None:
                value = (
                    [v.to_domain() for v in value] if self.nested[field][1] else value.to_domain()
                )
            values[attribute] = value
        values.update(given)
        # pydantic turns seconds into timedeltas, text into enum members, lists into tuples.
        return cast(D, _adapter(self.domain_type).validate_python(values))


def _type_argument(cls: type[WireModel[Any]]) -> type[Any] | None:
    """The ``D`` of ``class X(WireModel[D])`` (inherited by X's subclasses)."""
    for klass in cls.__mro__:
        metadata = getattr(klass, "__pydantic_generic_metadata__", None)
        if metadata and metadata["origin"] is WireModel and metadata["args"]:
            return cast(type[Any], metadata["args"][0])
    return None


def _field_names(domain: type[Any]) -> frozenset[str]:
    """The fields of a domain dataclass (or named tuple)."""
    if dataclasses.is_dataclass(domain):
        return frozenset(f.name for f in dataclasses.fields(domain))
    return frozenset(cast(tuple[str, ...], domain._fields))


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def _adapter(domain: type[Any]) -> TypeAdapter[Any]:
    # Built on first use: a TypeAdapter costs milliseconds, and most processes that
    # import the wire models (the service) only ever build bodies from domain objects.
    if domain not in _ADAPTERS:
        _ADAPTERS[domain] = TypeAdapter(domain)
    return _ADAPTERS[domain]


# -- request bodies --------------------------------------------------------------------------


class RequestModel(BaseModel):
    """Request bodies refuse unknown fields: a typo must not silently do nothing."""

    model_config = ConfigDict(extra="forbid")

    #: A null in this body clears the field (a PATCH); elsewhere a null is "not given".
    null_clears: ClassVar[bool] = False

    def arguments(self) -> dict[str, Any]:
        """The store verb's keyword arguments this body carries, by the store's names.

        Every field with a value; a null only where it clears the field, and then
        only if the request gave it (a PATCH changes what it names, nothing else).
        """
        if self.null_clears:
            return {store_name(f): getattr(self, f) for f in self.model_fields_set}
        values = ((f, getattr(self, f)) for f in type(self).model_fields)
        return {store_name(f): value for f, value in values if value is not None}

    @classmethod
    def body(cls, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The JSON body that carries these keyword arguments (by the verbs' names).

        A name that is not one of this body's is sent as it is, for the service to
        refuse naming it. Nulls are left out unless they clear the field.
        """
        fields = {argument_name(f): f for f in cls.model_fields}
        return {
            fields.get(name, name): json_value(value)
            for name, value in arguments.items()
            if value is not None or cls.null_clears
        }

    @classmethod
    def api_field(cls, name: str) -> str:
        """The API's name for a field the store named in an error (``every``: ``every_seconds``)."""
        for field in cls.model_fields:
            if name in (argument_name(field), store_name(field)):
                return field
        return name
