"""Hostile or broken input fails fast with a clear message and never runs anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduling.spec import MAX_BYTES, SpecError, parse_job_spec


def errors_of(text: str | bytes) -> list[tuple[int | None, int | None, str]]:
    with pytest.raises(SpecError) as caught:
        parse_job_spec(text)
    return [(e.line, e.column, e.message) for e in caught.value.errors]


def test_size_limit_for_bytes_and_text(minimal_yaml: str) -> None:
    padded = minimal_yaml + "#" * (MAX_BYTES - len(minimal_yaml) - 1) + "\n"
    assert len(padded.encode()) == MAX_BYTES
    assert parse_job_spec(padded).name == "job"  # exactly at the limit is fine
    too_big = padded + "#"
    message = f"the spec is {MAX_BYTES + 1} bytes; the limit is {MAX_BYTES} bytes (64 KiB)"
    assert errors_of(too_big) == [(None, None, message)]
    assert errors_of(too_big.encode()) == [(None, None, message)]


def test_text_size_counts_utf8_bytes_not_characters(minimal_yaml: str) -> None:
    text = minimal_yaml + "# " + "é" * (MAX_BYTES // 2) + "\n"  # fewer characters than the limit, more bytes
    assert len(text) < MAX_BYTES
    assert "64 KiB" in errors_of(text)[0][2]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
            (None, None, "the spec is binary data (it contains NUL bytes), not YAML text"),
        ),
        (b"name: j\nroles: caf\xe9\n", (2, 11, "the spec is not UTF-8 text: byte 0xe9 cannot be decoded")),
        (
            "\ufeffname: a\x00b".encode("utf-16"),
            (None, None, "the spec is binary data (it contains NUL bytes), not YAML text"),
        ),
        ("name: a\x00b", (None, None, "the spec is binary data (it contains NUL characters), not YAML text")),
        (
            "name: j\n  x\x07y",
            (2, 4, "the spec contains the control character U+0007; it must be plain text"),
        ),
        ("name: \ud800", (1, 7, "the spec is not valid Unicode text")),
        (12, (None, None, "the spec must be YAML text, not int")),
    ],
)
def test_binary_and_non_utf8_input(data: object, expected: tuple) -> None:
    assert errors_of(data) == [expected]  # type: ignore[arg-type]


def test_python_tags_are_rejected_and_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    text = f"name: !!python/object/apply:os.system ['touch {marker}']\nroles: []\n"
    assert errors_of(text) == [(1, 7, "Python tags are not allowed (!!python/object/apply:os.system)")]
    assert not marker.exists()
    assert errors_of("name: !!python/name:os.system ''\n") == [
        (1, 7, "Python tags are not allowed (!!python/name:os.system)")
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: !Ref x\n", (1, 4, "the tag !Ref is not allowed; use plain values")),
        ("a: !!binary aGk=\n", (1, 4, "the tag !!binary is not allowed; use plain values")),
        ("a: !!set {x}\n", (1, 4, "the tag !!set is not allowed; use a plain mapping")),
        ("a: !!omap [x: 1]\n", (1, 4, "the tag !!omap is not allowed; use a plain list")),
    ],
)
def test_non_plain_tags_are_rejected(text: str, expected: tuple) -> None:
    assert errors_of(text) == [expected]


def test_alias_bomb_is_stopped() -> None:
    bomb = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for level in "bcdefghi":
        previous = chr(ord(level) - 1)
        bomb += f"{level}: &{level} [" + ",".join([f"*{previous}"] * 9) + "]\n"
    ((line, col, message),) = errors_of(bomb)
    assert message == "the spec uses more than 16 aliases (*name)"
    assert line == 3


def test_few_aliases_expanding_to_many_values_are_stopped() -> None:
    text = "a: &a [" + ",".join(["1"] * 1000) + "]\nb: [*a, *a, *a, *a, *a, *a]\n"
    assert errors_of(text)[0][2] == "the spec has more than 5000 values"


def test_too_many_values() -> None:
    assert errors_of("a: [" + ",".join(["1"] * 6000) + "]")[0][2] == "the spec has more than 5000 values"


@pytest.mark.parametrize("depth", [40, 60000])
def test_deep_nesting_is_refused_without_recursion_error(depth: int) -> None:
    assert errors_of("[" * depth) == [(1, 33, "the spec is nested more than 32 levels deep")]


def test_duplicate_keys_are_errors() -> None:
    text = "name: a\nroles:\n  - {name: x, image: i, image: j}\nname: b\n"
    assert errors_of(text) == [
        (3, 25, "duplicate key 'image' (first given on line 3)"),
        (4, 1, "duplicate key 'name' (first given on line 1)"),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", (None, None, "the spec is empty")),
        ("  \n\n", (None, None, "the spec is empty")),
        ("# only a comment\n", (None, None, "the spec is empty (only comments)")),
        (
            "- name: j\n",
            (1, 1, "the top level must be a mapping of fields (name: ..., roles: ...), not a list"),
        ),
        (
            "just text",
            (1, 1, "the top level must be a mapping of fields (name: ..., roles: ...), not a single value"),
        ),
        (
            "a: 1\n---\nb: 2\n",
            (2, 1, "YAML syntax: the spec must be one YAML document: remove the '---' line and what follows it"),
        ),
        ("a: b: c\n", (1, 5, "YAML syntax: unexpected ':' here: indent this line like the keys above it, "
                             "or put a value that contains ': ' in quotes")),
        (
            "name: [j\n",
            (1, 7, "YAML syntax: the list opened here with '[' is not closed with ']'"),
        ),
        ("? [a]\n: 1\n", (1, 3, "a key must be plain text, not a list or mapping")),
        ("<<: 3\n", (1, 5, "'<<' must merge a mapping or a list of mappings")),
        ("a: *nowhere\n", (1, 4, "YAML syntax: *nowhere names no anchor: define &name before it, or quote the value")),
        ("roles:\n  - name: x\n   image: y\n", (3, 4, "YAML syntax: this line's indentation does not match the lines above it")),
        ("a: 1\nb\nc: 2\n", (2, 1, "YAML syntax: this line is not a 'key: value' pair: add ':' after the key, "
                                 "or indent it as part of the value above")),
        ("\ta: 1\n", (1, 1, "YAML syntax: a tab cannot indent YAML: use spaces")),
        ("a: 'open\n", (1, 4, "YAML syntax: the quoted value opened here is not closed")),
        ("priority: 1" + "0" * 5000, (1, 11, "the number 10000000000000000000... is too long or malformed")),
        ("priority: 99999999999999999999", (1, 11, "the number 99999999999999999999 is too large")),
    ],
)
def test_structure_errors(text: str, expected: tuple) -> None:
    assert errors_of(text) == [expected]


def test_timestamps_stay_text_and_fail_as_durations(minimal_yaml: str) -> None:
    assert errors_of(minimal_yaml + "expectedDuration: 2024-01-01\n") == [
        (5, 19, "expectedDuration '2024-01-01' is not a duration (e.g. 30m, 2h, 1d or 1h30m)")
    ]
