"""Read back a rich table as a terminal of a given width shows it: its lines and the cells of a row."""

import io

from rich.console import Console
from rich.table import Table


def render(make_table, width: int) -> list[str]:
    """The lines of `make_table(width)` printed on a console `width` columns wide."""
    console = Console(file=io.StringIO(), width=width)
    table: Table = make_table(console.width)
    console.print(table)
    return console.file.getvalue().splitlines()


def cells(lines: list[str], *words: str) -> list[str]:
    """The stripped cells of the first line (header or row) holding every one of `words`."""
    line = next(line for line in lines if all(word in line for word in words))
    border = "┃" if "┃" in line else "│"
    return [cell.strip() for cell in line.strip(f"{border} ").split(border)]
