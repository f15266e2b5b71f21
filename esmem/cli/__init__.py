"""The `esmem` command line: each command parses, calls one library function, prints."""
from esmem.cli.main import main

__all__ = ["main"]
