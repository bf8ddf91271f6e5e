"""The `virtxml-cpu` command: the parser and its dispatch (command.py), one module per verb holding its
options and its `main(args)`, and what the verbs share (options, files, live, output)."""

from .command import build_parser, main, run

__all__ = ["build_parser", "main", "run"]
