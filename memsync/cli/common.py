"""Helpers shared by the command modules."""

from __future__ import annotations

import argparse
import os

from memsync import config


def load_config(args: argparse.Namespace) -> config.Config:
    """Load the configuration the command line names. Raises ConfigError (exit 10)."""
    path = config.config_path(getattr(args, "config", None), os.environ)
    return config.load(path, os.environ)
