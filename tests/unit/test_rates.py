"""How a rate is written: the spellings accepted, and what is refused naming the field."""

from __future__ import annotations

import pytest

from fencepost.domain.errors import ValidationError
from fencepost.domain.limits import parse_rate


@pytest.mark.parametrize(
    ("text", "per_second"),
    [
        ("50/s", 50.0),
        ("50/sec", 50.0),
        ("3000/min", 50.0),
        ("3000/minutes", 50.0),
        ("100/h", 100 / 3600),
        ("2/hrs", 2 / 3600),
        ("10/days", 10 / 86400),
        ("100/5min", 100 / 300),
        (" 1.5 / s ", 1.5),
    ],
)
def test_the_spellings_of_a_rate(text: str, per_second: float) -> None:
    assert parse_rate(text).per_second == pytest.approx(per_second)


@pytest.mark.parametrize(
    "text",
    ["100/ms", "5/fortnight", "1/mss", "0/s", "-1/s", "1e400/s", "", "50", "50/", "/s", "x" * 41],
)
def test_what_is_no_rate_is_refused_naming_the_field(text: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_rate(text)
    assert caught.value.field == "rate"


def test_a_rate_reads_back_as_it_is_written() -> None:
    for text in ("50/s", "3000/min", "100/h", "10/d"):
        assert str(parse_rate(text)) == text
        assert parse_rate(str(parse_rate(text))) == parse_rate(text)
