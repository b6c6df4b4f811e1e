"""`nmt-tf COMMAND --help`: that command's flags and, for the commands that read --config, every
config field with its default and its meaning (from the config classes' docstrings).

Imports nothing that imports TensorFlow at module level: `nmt-tf` imports it only after it
has silenced TensorFlow's start-up lines (cli/app.py)."""

import dataclasses
import re
import textwrap

from absl import flags

from nmt_tf.cli import SUMMARIES

# Commands that read --config (the others read the run's config.json).
CONFIG_COMMANDS = ("train", "main")


def field_docs(cls):
  """{field: one-line meaning} from the "Attributes:" section of a dataclass's docstring;
  an entry "a, b: text" documents both fields."""
  doc = (cls.__doc__ or "").split("Attributes:", 1)
  if len(doc) < 2:
    return {}
  docs, names = {}, []
  for line in textwrap.dedent(doc[1]).splitlines():
    match = re.match(r"^\s{0,4}([a-z_][a-z0-9_, ]*):\s*(.*)$", line)
    if match and not line.startswith("      "):
      names = [n.strip() for n in match.group(1).split(",")]
      for name in names:
        docs[name] = match.group(2).strip()
    elif line.strip() and names:
      for name in names:
        docs[name] += " " + line.strip()
  return {name: re.split(r"\.\s+(?=[A-Z(])", text)[0].rstrip(".")
          for name, text in docs.items()}


def config_help():
  """Lines: every config section's fields with default and meaning."""
  from nmt_tf.experiment.config import SECTIONS  # pylint: disable=g-import-not-at-top
  lines = ["config fields (--config.SECTION.FIELD=VALUE; defaults of nmt_tf/experiment/config.py,"
           " which the recipe in --config may change):"]
  for section, cls in SECTIONS.items():
    docs = field_docs(cls)
    lines.append(f"  {section}:")
    for field in dataclasses.fields(cls):
      default = getattr(cls(), field.name)
      meaning = docs.get(field.name, "")
      lines.append(f"    {field.name}={default!r}" + (f"  {meaning}" if meaning else ""))
  return lines


def flag_lines(module_name):
  """`--name=default  help` for every flag defined by module `module_name`."""
  lines = []
  for flag in sorted(flags.FLAGS.flags_by_module_dict().get(module_name, []),
                     key=lambda f: f.name):
    default = "" if flag.default is None else f"={flag.default_as_str.strip(chr(39))}"
    lines.append(f"  --{flag.name}{default}  {' '.join(flag.help.split())}")
  return lines


def command_help(prog, name, module):
  """The help text of command `name` (its module `module`)."""
  doc = (module.__doc__ or "").strip()
  lines = [f"usage: {prog} {name} [--flags]", "", SUMMARIES[name], ""]
  if doc:
    lines += [doc, ""]
  own = flag_lines(module.__name__)
  if own:
    lines += [f"{name} flags:"] + own + [""]
  lines += ["shared flags:"] + flag_lines("nmt_tf.cli.common")
  lines += ["  --verbose  also show TensorFlow's C++ log lines and INFO messages", ""]
  if name in CONFIG_COMMANDS:
    from nmt_tf import configs  # pylint: disable=g-import-not-at-top
    lines += configs.listing() + [""] + config_help()
  return "\n".join(lines)
