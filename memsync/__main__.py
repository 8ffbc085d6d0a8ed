"""``python -m memsync``: the command-line entry point."""

from memsync.cli import main

raise SystemExit(main())
