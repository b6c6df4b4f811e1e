"""Subcommands of run.py: one module per command, each with COMMAND, HELP and run(argv).

Modules define their own absl flags at import; flags used by several commands live in
nmt_tf/cli/common.py.
"""

import importlib
import pkgutil


def commands():
  """{command name: module} of every module in this package that defines COMMAND."""
  found = {}
  for info in pkgutil.iter_modules(__path__):
    module = importlib.import_module(f"{__name__}.{info.name}")
    if hasattr(module, "COMMAND"):
      found[module.COMMAND] = module
  return found
