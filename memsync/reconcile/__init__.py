"""Reconcile: make the two stores agree again.

``plan`` turns findings into ``actions`` (pure), ``sources`` finds the snapshot a lost point
comes back from, ``apply`` applies the plan through a route with a journal.
"""
