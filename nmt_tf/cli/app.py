"""The `nmt-tf` command (and `python run.py`): `nmt-tf COMMAND [--flags]`.

Commands are the modules of nmt_tf/cli (train, translate, evaluate, score, export, ...);
`nmt-tf help` lists them. This module dispatches, and turns what the command line gets wrong
(an unknown flag, a value of the wrong type, a --config file that is missing or does not load,
an unknown --config.KEY) into one `error:` line and exit code 2, as the commands do with the
errors users can cause. `--config=RECIPE[:MODEL]` without a path names a recipe of
nmt_tf/configs and a model preset (`--config=multi30k:luong`), which an installed nmt_tf ships.
"""

import os
import re
import sys
import warnings

# --verbose shows TensorFlow's C++ log lines; by default they are hidden (errors surface as
# Python exceptions), and so are the ones logged before TensorFlow's logging starts
# (_quiet_startup).
VERBOSE = any(arg in ("--verbose", "--verbose=true", "--verbose=True", "--verbose=1")
              for arg in sys.argv)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0" if VERBOSE else "3")

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top

from nmt_tf import cli  # pylint: disable=g-import-not-at-top
from nmt_tf import console  # pylint: disable=g-import-not-at-top
from nmt_tf import write_path  # pylint: disable=g-import-not-at-top
from nmt_tf import configs  # pylint: disable=g-import-not-at-top
from nmt_tf.cli import help as help_text  # pylint: disable=g-import-not-at-top

COMMANDS = {}

flags.DEFINE_bool("verbose", False, "Also show TensorFlow's C++ log lines and the INFO messages "
                  "of TensorFlow and nmt_tf (hidden by default).")


def _prog():
  """How the user called us: "nmt-tf", "python -m nmt_tf" or "python run.py"."""
  program = os.path.basename(sys.argv[0])
  if program.startswith("nmt-tf"):
    return "nmt-tf"
  return "python -m nmt_tf" if program == "__main__.py" else "python run.py"


def _one_line(error):
  """The message of `error` on one line; for a message that carries a traceback (ml_collections
  puts one in its config-file errors), its first line and the traceback's last line."""
  lines = [" ".join(line.split()) for line in str(error).splitlines() if line.strip()]
  if any(line.startswith("Traceback (most recent call last)") for line in lines):
    lines = [lines[0], lines[-1]]
  return " ".join(lines) or type(error).__name__


def _exit_with_error(message):
  print(f"error: {message}", file=sys.stderr)
  sys.exit(2)


def _override_error(error, argv):
  """The message for an unknown --config.KEY (ml_collections raises AttributeError/KeyError
  whose message starts with the unknown key), quoting the override that names that key."""
  reason = error
  while isinstance(reason, BaseException) and reason.args:
    reason = reason.args[0]
  reason = " ".join(str(reason).replace("'", "").replace('"', "").split())
  key = reason.split(" ", 1)[0]
  overrides = [a for a in argv if a.startswith("--config.")]
  override = next((a for a in overrides if key in a.split("=", 1)[0].split(".")[1:]),
                  overrides[0] if overrides else "--config.*")
  reason = re.sub(r" Did you mean (\S+) instead of \S+\?$", r"; did you mean \1?", reason)
  return (f"invalid config override {override} (unknown key {reason}); check the section and "
          f"key names with `{_prog()} train --help`.")


def _config_file_error(path, error, see):
  """The message for a --config file that cannot be loaded."""
  file = path.split(":", 1)[0]  # config_flags passes what follows ':' to get_config
  if not os.path.exists(file):
    found = "no such file"
  elif os.path.isdir(file):
    found = "a directory, not a file"
  else:
    found = f"cannot load it ({type(error).__name__}: {_one_line(error)})"
  return (f"--config={path}: {found}; pass a recipe such as --config=multi30k:cgru "
          f"(`{_prog()} recipes` lists them) or a config file, or fix it; {see}.")


def parse_flags(argv):
  """absl's flag parsing for app.run, with every error as one `error:` line and exit code 2
  (absl itself prints "FATAL Flags parsing error" and exits with 1)."""
  command = next((arg for arg in argv[1:] if not arg.startswith("-")), None)
  see = (f"see {_prog()} {command} --helpfull" if command in COMMANDS else
         f"see {_prog()} help")
  config = next((a.split("=", 1)[1] for a in argv if a.startswith("--config=")), None)
  if any(a in ("--help", "-h", "--helpshort") for a in argv[1:]):
    print(help_text.command_help(_prog(), command, COMMANDS[command]) if command in COMMANDS
          else _usage())
    sys.exit(0)
  level = absl_logging.get_verbosity()
  if not VERBOSE:  # ml_collections' warnings while it loads --config: the errors below say it
    absl_logging.set_verbosity(absl_logging.ERROR)
  try:
    remaining = flags.FLAGS(argv)
  except flags.Error as error:  # unknown flag, missing or ill-typed value
    message = re.sub(r"\. Did you mean: (.+?) ?\?$", r" (did you mean \1?)", _one_line(error))
    # A recipe's get_config refusing its argument (an unknown model preset): its own words.
    message = re.sub(r"^flag --config=.*ConfigError: ", "--config: ", message).rstrip(".")
    _exit_with_error(f"{message}; {see}.")
  except Exception as error:  # pylint: disable=broad-except
    # The --config file is Python code run while the flags are parsed: what it raises (a
    # syntax error, a failing get_config) is an error of the config, not of this program;
    # so is an unknown --config.KEY (AttributeError/KeyError) when --config=FILE is given.
    if config is not None and isinstance(error, AttributeError) and "get_config" in str(error):
      _exit_with_error(_no_get_config(config, see))
    if (isinstance(error, (AttributeError, KeyError)) and
        any(a.startswith("--config.") for a in argv)):
      root = re.search(r"Attribute <class '?([\w.]+)'?>\.(\w+) does not exist", str(error))
      overridden = {a.split("=", 1)[0].split(".")[1] for a in argv if a.startswith("--config.")}
      if config is not None and root and root.group(2) in overridden:  # no config to override
        _exit_with_error(_not_a_config(config, root.group(1).rsplit(".", 1)[-1]))
      _exit_with_error(_override_error(error, argv))
    if config is None:
      _exit_with_error(f"{type(error).__name__}: {_one_line(error)}; {see}.")
    _exit_with_error(_config_file_error(config, error, see))
  finally:
    absl_logging.set_verbosity(level)
  try:  # ml_collections keeps a load error and raises it when the config is first used
    is_config = hasattr(flags.FLAGS.config, "keys")
  except OSError as error:
    _exit_with_error(_config_file_error(flags.FLAGS["config"].config_filename, error, see))
  if not is_config:
    _exit_with_error(_not_a_config(flags.FLAGS["config"].config_filename,
                                   type(flags.FLAGS.config).__name__))
  return remaining


def _not_a_config(path, type_name):
  return (f"--config={path.split(':', 1)[0]}: its get_config() returned {type_name}, not a "
          "config; return the ml_collections.ConfigDict of the experiment "
          f"(nmt_tf/configs/generated.py shows one); see {_prog()} train --helpfull.")


def _no_get_config(path, see):
  return (f"--config={path.split(':', 1)[0]}: the file defines no get_config(); a config "
          "file defines get_config() returning the experiment's ml_collections.ConfigDict "
          f"(nmt_tf/configs/generated.py shows one); {see}.")


def _usage():
  lines = [f"usage: {_prog()} COMMAND [--flags]   (--helpfull lists every flag)", "",
           "commands:"]
  lines += [f"  {name:<10} {summary}" for name, summary in sorted(cli.SUMMARIES.items())]
  return "\n".join(lines)


def _answer_without_tensorflow(argv):
  """The exit code of a command line that only asks for the list of commands (`nmt-tf`,
  `nmt-tf help`, `nmt-tf --help`) or of the recipes (`nmt-tf recipes`), or names no command
  (`nmt-tf trian`), having answered it; None for any other, which the commands answer. These
  need neither TensorFlow nor the other command modules, so they answer at once."""
  args = argv[1:]
  if not args:
    print(_usage())
    return 2
  if len(args) > 1:
    return None
  if args[0] in ("help", "-h", "--help", "--helpshort"):
    print(_usage())
    return 0
  if args[0] == "recipes":
    from nmt_tf.cli import recipes  # pylint: disable=g-import-not-at-top
    return recipes.run([])
  if not args[0].startswith("-") and args[0] not in cli.SUMMARIES:
    return _unknown_command(args[0])
  return None


def _unknown_command(command):
  print(f"error: unknown command {command!r}; `{_prog()} help` lists the commands.",
        file=sys.stderr)
  return 2


def main(argv):
  # TensorFlow's own INFO lines (saver, SavedModel builder) and absl's INFO lines drown the
  # progress output; --verbose brings them back.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if not flags.FLAGS.verbose:
    tf.get_logger().setLevel("ERROR")
    absl_logging.set_verbosity(absl_logging.WARNING)
  if len(argv) < 2 or argv[1] in ("help", "-h"):
    print(_usage())
    return 0 if len(argv) >= 2 else 2
  command = argv[1]
  if command not in COMMANDS:
    return _unknown_command(command)
  from nmt_tf.cli import common  # pylint: disable=g-import-not-at-top  (with the commands)
  ignored = common.config_flags_error(command, sys.argv)
  if ignored:
    print(f"error: {ignored}", file=sys.stderr)
    return 2
  # SIGTERM stops a command as Ctrl-C does: its staged outputs are removed or kept
  # (nmt_tf/write_path.py), never left half-written; a command says what it kept.
  with write_path.termination_as_interrupt():
    try:
      return COMMANDS[command].run(argv[2:]) or 0
    except BaseException as error:  # pylint: disable=broad-exception-caught
      # TensorFlow may turn the KeyboardInterrupt of a stop into another error.
      if not (isinstance(error, KeyboardInterrupt) or write_path.stop_requested()):
        raise
      write_path.report_stop(f"error: {command} interrupted; nothing half-written is left "
                             "(outputs are staged and renamed when complete); rerun the "
                             "command.")
      return 130


def _recipe_names(argv):
  """argv with `--config=RECIPE[:MODEL]` replaced by that recipe's path and model."""
  out = []
  for arg in argv:
    if arg.startswith("--config="):
      value = arg.split("=", 1)[1]
      found = configs.resolve(value)
      if found:
        path, model = found
        arg = f"--config={path}" + (f":{model}" if model else "")
    out.append(arg)
  return out


def _quiet_startup():
  """Keeps TensorFlow's C++ log lines and Python warnings off the console (--verbose shows
  them): TensorFlow is imported and finds its devices with the native stderr silenced (the
  lines it logs before its logging is set up ignore TF_CPP_MIN_LOG_LEVEL: oneDNN notices, the
  CUDA stub), then every later C++ log line is filtered out (nmt_tf/console.py)."""
  with console.native_stderr_silenced():
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    tf.config.list_physical_devices()
  console.filter_native_logs()
  warnings.filterwarnings("ignore")


def run():
  """The console entry point: `nmt-tf COMMAND [--flags]`. Output into a pipe that closes early
  (`nmt-tf train --help | head`) ends the command quietly, as it ends other Unix commands."""
  try:
    try:
      _run()  # ends with SystemExit
    finally:
      sys.stdout.flush()  # here, not at the interpreter's exit, where it could not be caught
  except BrokenPipeError:
    # Python's advice for SIGPIPE: the interpreter's own flush at exit would raise again.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(1)


def _run():
  code = _answer_without_tensorflow(sys.argv)
  if code is not None:
    sys.exit(code)
  if not VERBOSE:
    _quiet_startup()
  sys.argv = _recipe_names(sys.argv)
  try:
    COMMANDS.update(cli.commands())
  except (AttributeError, KeyError, TypeError, ValueError) as error:
    # ml_collections applies --config.KEY=VALUE overrides while the flag is defined, unless
    # --config is given (then while the flags are parsed: parse_flags).
    _exit_with_error(_override_error(error, sys.argv))
  app.run(main, flags_parser=parse_flags)
