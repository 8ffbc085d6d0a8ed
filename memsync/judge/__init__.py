"""The judge: every disagreement between captured stores, as findings. Pure: no I/O, no clock.

``rules.find_problems`` and ``rules.judge_memories`` run the store-wide rules and dispatch the
per-memory rules (``memory_rules``) and the warning-level ones (``warning_rules``); ``common``
holds what they share.
"""
