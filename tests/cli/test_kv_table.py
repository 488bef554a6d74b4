"""``kv_table``: the two-column ``metric | value`` table several commands render."""

import io

from rich.console import Console

from tierwise.cli._output import kv_table, print_table


def test_kv_table_prints_names_literally_without_a_header():
    table = kv_table("model x[/bold]", value_overflow="fold")
    table.add_row("[red]name", "a" * 30)
    out = io.StringIO()
    print_table(Console(file=out, width=40, markup=False, highlight=False), table)
    text = out.getvalue()
    assert "model x[/bold]" in text and "[red]name" in text and "a" * 30 in text
    assert "metric" not in text and "value" not in text
    assert [c.style for c in table.columns] == ["bold", ""]
