"""The real app process tests run: memsync.demo.app (one ``mem0.Memory`` for life, agent optional)."""

from __future__ import annotations

from memsync.demo.app import AppProcess, main

__all__ = ["AppProcess", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
