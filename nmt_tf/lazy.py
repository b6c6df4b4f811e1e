"""Package attributes imported on first use (PEP 562 module __getattr__), so that importing a
package imports none of its modules: `import nmt_tf`, the model presets, the model config and
`nmt-tf recipes` then need no TensorFlow, which the models, the data pipelines, the experiment
config (through the data package) and the run directory import.

  __getattr__ = lazy.attributes(__name__, {"RunDir": "nmt_tf.experiment.run_dir", ...})
"""

import importlib


def attributes(package, modules):
  """The module `__getattr__` of `package`: `modules` maps each public name to the module that
  defines it ("module:attribute" where the module names it otherwise); any other name that is
  a submodule of the package imports that submodule, as an eager `from package import
  submodule` in the package's __init__ would have."""

  def __getattr__(name):  # pylint: disable=invalid-name
    if name in modules:
      module, _, attribute = modules[name].partition(":")
      return getattr(importlib.import_module(module), attribute or name)
    try:
      return importlib.import_module(f"{package}.{name}")
    except ModuleNotFoundError as error:
      if error.name != f"{package}.{name}":
        raise  # the submodule exists and imports something that does not
      raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

  return __getattr__
