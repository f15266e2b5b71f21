"""Reading memories from JSONL (esmem/domain/jsonl.py): the rules `esmem import` applies to a file
before anything is written; no engine needed."""
from __future__ import annotations

from pathlib import Path

import pytest

from esmem.domain.jsonl import read_jsonl
from esmem.errors import InvalidInput


def _file(tmp_path: Path, data: bytes) -> str:
    path = tmp_path / "m.jsonl"
    path.write_bytes(data)
    return str(path)


def test_a_line_with_both_id_and_external_id_is_refused_naming_the_line(tmp_path: Path) -> None:
    """`id` is stored as the external_id: one of the two was silently dropped."""
    path = _file(tmp_path, b'{"content": "one"}\n{"id": "a1", "external_id": "b1", "content": "two"}\n')
    with pytest.raises(InvalidInput, match=r'm\.jsonl:2: give "id" or "external_id", not both'):
        read_jsonl(path)


def test_a_line_id_is_its_external_id(tmp_path: Path) -> None:
    path = _file(tmp_path, b'{"id": "a1", "content": "one"}\n\n{"external_id": "b1", "content": "two"}\n')
    items, lines = read_jsonl(path)
    assert [i.external_id for i in items] == ["a1", "b1"] and lines == [1, 3]


def test_a_leading_byte_order_mark_is_not_part_of_the_first_line(tmp_path: Path) -> None:
    """Editors on Windows save UTF-8 with a BOM; the file must read as the same lines without it."""
    text = '{"content": "第一行 line one"}\n{"content": "line two"}\n'.encode("utf-8")
    with_bom, _ = read_jsonl(_file(tmp_path, b"\xef\xbb\xbf" + text))
    (tmp_path / "m.jsonl").unlink()
    without, _ = read_jsonl(_file(tmp_path, text))
    assert with_bom == without and with_bom[0].content == "第一行 line one"
