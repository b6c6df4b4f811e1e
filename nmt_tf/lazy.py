"""Package attributes imported on first use (PEP 562 module __getattr__), so that importing a
package imports none of its modules: `nmt-tf recipes` and the config modules then answer
without TensorFlow, which the models, the data pipelines and the run directory import.

  __getattr__ = lazy.attributes(__name__, {"RunDir": "nmt_tf.experiment.run_dir", ...})
"""

import importlib


def attributes(package, modules):
  """The module `__getattr__` of `package`: `modules` maps each public name to the module that
  defines it; any other name that is a submodule of the package imports that submodule, as an
  eager `from package import submodule` in the package's __init__ would have."""

  def __getattr__(name):  # pylint: disable=invalid-name
    if name in modules:
      return getattr(importlib.import_module(modules[name]), name)
    try:
      return importlib.import_module(f"{package}.{name}")
    except ModuleNotFoundError as error:
      if error.name != f"{package}.{name}":
        raise  # the submodule exists and imports something that does not
      raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

  return __getattr__
