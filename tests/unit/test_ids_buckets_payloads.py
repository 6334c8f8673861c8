"""Ids, buckets and payload encoding: small pure pieces with sharp edges."""

from __future__ import annotations

import subprocess
import sys
import uuid
from datetime import UTC, datetime

import pytest

from fencepost import ValidationError
from fencepost.domain import payloads
from fencepost.domain.buckets import bucket_for
from fencepost.domain.ids import IdGenerator, first_id_after, id_floor, id_ms


def test_ids_are_uuid7_and_strictly_increase_within_a_millisecond() -> None:
    ids = IdGenerator()
    made = [ids.new(1_700_000_000_000) for _ in range(5000)]
    assert made == sorted(made)
    assert len(set(made)) == 5000
    parsed = uuid.UUID(made[0])
    assert parsed.version == 7
    assert parsed.variant == uuid.RFC_4122
    assert parsed.int >> 80 == 1_700_000_000_000


@pytest.mark.parametrize("ms", [0, 1, 1_700_000_000_000, 2**48 - 1])
def test_an_id_s_millisecond_is_read_back_and_its_floor_sorts_first(ms: int) -> None:
    made = IdGenerator().new(ms)
    assert id_ms(made) == id_ms(id_floor(ms)) == ms
    assert id_floor(ms) <= made
    if ms:
        assert made > id_floor(ms) > IdGenerator().new(ms - 1)


def test_every_id_made_by_an_instant_sorts_below_the_first_id_after_it() -> None:
    instant = datetime(2026, 3, 29, 1, 30, 0, 999_999, tzinfo=UTC)  # the last µs of a ms
    ms = int(instant.timestamp() * 1000)
    assert IdGenerator().new(ms) < first_id_after(instant) <= IdGenerator().new(ms + 1)


def test_ids_keep_increasing_when_the_clock_steps_back() -> None:
    ids = IdGenerator()
    first = ids.new(2_000)
    assert ids.new(1_000) > first


def test_bucket_is_stable_across_processes() -> None:
    """blake2b, not hash(): a fresh interpreter (new hash seed) agrees."""
    here = [bucket_for(f"tenant-{i}") for i in range(20)]
    code = "from fencepost.domain.buckets import bucket_for;" + (
        "print([bucket_for(f'tenant-{i}') for i in range(20)])"
    )
    there = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345"},
    ).stdout
    assert there.strip() == str(here)
    assert bucket_for("tenant-1") == 51  # pinned: changing the hash would move every row
    assert {bucket_for(f"k{i}", 8) for i in range(200)} == set(range(8))


def test_encode_is_strict_json() -> None:
    assert payloads.encode({"a": [1, "é"]}, field="inputs", limit=100) == '{"a":[1,"é"]}'
    for bad in (float("nan"), {"x": float("-inf")}, {1, 2}, b"bytes", object()):
        with pytest.raises(ValidationError) as caught:
            payloads.encode(bad, field="result", limit=100)
        assert caught.value.field == "result"


def test_encode_limit_counts_utf8_bytes() -> None:
    payloads.encode("x" * 98, field="inputs", limit=100)  # 100 bytes with quotes
    with pytest.raises(ValidationError, match="101 bytes"):
        payloads.encode("x" * 99, field="inputs", limit=100)
    with pytest.raises(ValidationError, match="limit is 100"):
        payloads.encode("é" * 50, field="inputs", limit=100)


def test_fingerprint_ignores_key_order() -> None:
    assert payloads.fingerprint({"a": 1, "b": [2]}) == payloads.fingerprint({"b": [2], "a": 1})
    assert payloads.fingerprint({"a": 1}) != payloads.fingerprint({"a": 2})


def test_circular_values_are_refused() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(ValidationError) as caught:
        payloads.encode({"loop": loop}, field="inputs", limit=1000)
    assert caught.value.field == "inputs"
    assert payloads.encode({"fine": [1]}, field="inputs", limit=1000) == '{"fine":[1]}'


@pytest.mark.parametrize(
    "value",
    [None, 0, -1.5, 1e300, "", 'é\n"\u2028', [], {}, {"a": {"b": [True, False, None]}}],
)
def test_encode_matches_the_standard_library(value: object) -> None:
    import json

    expected = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    assert payloads.encode(value, field="inputs", limit=10_000) == expected


def test_decode_all() -> None:
    texts = ['{"a":1}', "[2]", "null", '"s"']
    assert payloads.decode_all(texts) == [{"a": 1}, [2], None, "s"]
    assert payloads.decode_all([]) == []


@pytest.mark.parametrize(
    ("value", "refused"),
    [
        ("a\x00b", True),
        ({"k\x00": 1}, True),
        ("\\\x00", True),
        ("\\u0000", False),  # a backslash, then the letters u0000
        ("\\\\u0000", False),
        ("plain", False),
    ],
)
def test_nul_characters_are_refused_everywhere(value: object, refused: bool) -> None:
    if refused:
        with pytest.raises(ValidationError, match="U\\+0000"):
            payloads.encode(value, field="inputs", limit=1000)
    else:
        assert payloads.decode(payloads.encode(value, field="inputs", limit=1000)) == value


def test_parse_buckets() -> None:
    from fencepost.domain.buckets import parse_buckets

    assert parse_buckets("0-3,20, 2") == (0, 1, 2, 3, 20)
    assert parse_buckets("63") == (63,)
    assert parse_buckets("0-7", num_buckets=8) == tuple(range(8))
    for bad, words in (
        ("64", "outside 0-63"),
        ("0-64", "outside 0-63"),
        ("-1", "not a bucket"),
        ("5-2", "backwards"),
        ("a", "not a bucket"),
        ("", "not a bucket"),
        ("1,,2", "not a bucket"),
    ):
        with pytest.raises(ValidationError, match=words) as caught:
            parse_buckets(bad)
        assert caught.value.field == "buckets"
