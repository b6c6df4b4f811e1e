"""`run.py` command lines that users get wrong, as real processes: each gives one `error:` line
naming what was received and the fix, exit code 2, and no traceback."""

import os
import subprocess
import sys
import tempfile

import pytest
import tensorflow as tf

from nmt_tf import console
from tests.run_fixtures import make_tiny_run
from tests.waits import SAFETY_NET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_py(*args, cwd=None):
  """Runs `python run.py ARGS`; returns the CompletedProcess (text output)."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  return subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), *args], cwd=cwd,
                        capture_output=True, text=True, env=env, timeout=SAFETY_NET, check=False)


@pytest.mark.slow  # one process per error
class CommandLineErrorTest(tf.test.TestCase):

  def error_line(self, *args, cwd=None):
    """The one `error:` line of a run.py process that must fail with exit code 2."""
    proc = run_py(*args, cwd=cwd)
    self.assertEqual(proc.returncode, 2, proc.stderr[-2000:])
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    self.assertLen(lines, 1, proc.stderr[-2000:])
    self.assertNotIn("Traceback", proc.stderr)
    self.assertNotIn("FATAL", proc.stderr)
    self.assertEqual(proc.stdout, "")
    return lines[0]

  def test_flag_of_the_wrong_type(self):
    self.assertEqual(
        self.error_line("train", "--config.train.steps=abc"),
        "error: flag --config.train.steps=abc: invalid literal for int() with base 10: 'abc'; "
        "see python run.py train --helpfull.")
    self.assertEqual(
        self.error_line("translate", "--beam_size=abc"),
        "error: flag --beam_size=abc: invalid literal for int() with base 10: 'abc'; see "
        "python run.py translate --helpfull.")

  def test_unknown_flag_and_missing_value(self):
    self.assertEqual(self.error_line("evaluate", "--beam_sise=3"),
                     "error: Unknown command line flag 'beam_sise' (did you mean beam_size?); "
                     "see python run.py evaluate --helpfull.")
    self.assertEqual(self.error_line("export", "--beam_size"),
                     "error: Missing value for flag --beam_size; see python run.py export "
                     "--helpfull.")

  def test_missing_or_broken_config_file(self):
    tmp = tempfile.mkdtemp()
    self.assertEqual(
        self.error_line("train", "--config=nope.py", cwd=tmp),
        "error: --config=nope.py: no such file; pass a recipe such as --config=multi30k:cgru "
        "(`python run.py recipes` lists them) or a config file, or fix it; see python run.py "
        "train --helpfull.")
    self.assertEqual(
        self.error_line("train", "--config=multi30k:transformer", cwd=tmp),
        "error: --config: Unknown model preset 'transformer'; expected one of cgru, rnnsearch, "
        "encdec, luong, sar_avg, sar_cavg, memory_rnn, self_attentive_rnn (`nmt-tf recipes` "
        "lists them); see python run.py train --helpfull.")
    self.assertIn("--config=nope.py: no such file",
                  self.error_line("train", "--config=nope.py", "--config.train.steps=5",
                                  cwd=tmp))
    with open(os.path.join(tmp, "broken.py"), "w", encoding="utf-8") as f:
      f.write("def get_config(:\n")
    self.assertRegex(self.error_line("train", "--config=broken.py", cwd=tmp),
                     r"^error: --config=broken\.py: cannot load it \(SyntaxError: invalid "
                     r"syntax \(broken\.py, line 1\)\);")

  def test_a_config_file_without_a_config(self):
    tmp = tempfile.mkdtemp()
    for name, text in (("none.py", "def get_config():\n  return None\n"),
                       ("noget.py", "x = 1\n")):
      with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
        f.write(text)
    returned_none = (
        "error: --config=none.py: its get_config() returned NoneType, not a config; return "
        "the ml_collections.ConfigDict of the experiment (nmt_tf/configs/generated.py shows "
        "one); see python run.py train --helpfull.")
    self.assertEqual(self.error_line("train", "--config=none.py", cwd=tmp), returned_none)
    # With an override, the config is still what is wrong, not the override.
    self.assertEqual(self.error_line("train", "--config=none.py", "--config.train.steps=3",
                                     cwd=tmp), returned_none)
    expected = ("error: --config=noget.py: the file defines no get_config(); a config file "
                "defines get_config() returning the experiment's ml_collections.ConfigDict "
                "(nmt_tf/configs/generated.py shows one); see python run.py train --helpfull.")
    self.assertEqual(self.error_line("train", "--config=noget.py", cwd=tmp), expected)
    self.assertEqual(self.error_line("train", "--config=noget.py", "--config.train.steps=3",
                                     cwd=tmp), expected)

  def test_an_unknown_command(self):
    self.assertEqual(self.error_line("bogus"),
                     "error: unknown command 'bogus'; `python run.py help` lists the commands.")

  def test_damaged_vocabulary_of_the_run(self):
    run_dir = tempfile.mkdtemp()
    os.makedirs(os.path.join(run_dir, "vocab"))
    manifest = os.path.join(run_dir, "vocab", "tokenizers.json")
    with open(manifest, "w", encoding="utf-8") as f:
      f.write("")
    line = self.error_line("train", f"--run_dir={run_dir}", "--config.data.train_size=50",
                           "--config.data.valid_size=4", "--config.data.test_size=4",
                           "--config.tokenizer.kind=word")
    self.assertEqual(line, f"error: {manifest} is empty or not valid JSON (the file has no "
                     "content); restore it from a backup or retrain the tokenizers in a new "
                     "--run_dir (the run's checkpoints need these vocabularies).")

  def test_config_flags_that_a_decoding_command_would_ignore(self):
    run_dir = os.path.join(tempfile.mkdtemp(), "run")
    make_tiny_run(run_dir, attention_mode="hard")
    config = os.path.join(run_dir, "config.json")
    self.assertEqual(
        self.error_line("evaluate", f"--run_dir={run_dir}", "--config.model.hard_inference=argmax"),
        f"error: evaluate reads the run's config, {config}, where model.hard_inference is "
        "'expectation', and --config gives 'argmax'; pass --hard_inference=argmax instead.")
    self.assertEqual(
        self.error_line("translate", f"--run_dir={run_dir}", "--config.decode.beam_size=2",
                        "--config.train.steps=5"),
        f"error: translate reads the run's config, {config}, where decode.beam_size is 3, and "
        "--config gives 2; pass --beam_size=2 instead.")
    line = self.error_line("export", f"--run_dir={run_dir}", "--config=generated:cgru")
    self.assertStartsWith(line, f"error: export reads the run's config, {config}, where model.")
    self.assertEndsWith(line, "; leave --config out, or train another --run_dir with it (the "
                        "run's own config is what it was trained with).")
    # The flags the run was trained with (training's own sections aside) pass.
    source = os.path.join(os.path.dirname(run_dir), "in.txt")
    with open(source, "w", encoding="utf-8") as f:
      f.write("the boy helps the king\n")
    proc = run_py("translate", f"--run_dir={run_dir}", f"--input_file={source}",
                  "--config.decode.beam_size=3", "--config.model.attention_mode=hard",
                  "--config.train.steps=5")
    self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
    self.assertLen(proc.stdout.splitlines(), 1)

  def test_bad_streamed_training_shards(self):
    tmp = tempfile.mkdtemp()
    shards = {"train.0.src": b"ein Hund\n", "train.0.tgt": b"a dog\n",
              "train.1.src": b"eine Katze\ncaf\xe9\n", "train.1.tgt": b"a cat\ncafe\n"}
    for name, content in shards.items():
      with open(os.path.join(tmp, name), "wb") as f:
        f.write(content)
    files = ["--config.data.name=files", f"--config.data.train_src={tmp}/train.*.src",
             f"--config.data.train_tgt={tmp}/train.*.tgt", "--config.tokenizer.kind=word"]
    line = self.error_line("train", f"--run_dir={tmp}/run", *files)
    self.assertRegex(line, r"^error: .*train\.1\.src line 2: not valid UTF-8 \(byte 0xe9 at "
                     r"column 4\); re-encode the file as UTF-8")
    with open(os.path.join(tmp, "train.1.src"), "wb") as f:
      f.write(b"eine Katze\n")
    line = self.error_line("train", f"--run_dir={tmp}/run", *files)
    self.assertRegex(line, r"^error: Line counts differ: source .*train\.1\.src has 1 lines, "
                     r"target .*train\.1\.tgt has 2 lines")


@pytest.mark.slow  # processes
class ConsoleTest(tf.test.TestCase):
  """nmt_tf/console.py: TensorFlow's C++ log lines are kept off the console of a command;
  every other line on file descriptor 2, and Python's stderr, pass."""

  def test_native_log_lines_are_dropped_and_the_rest_passes(self):
    program = (
        "import os, sys\n"
        "from nmt_tf import console\n"
        "console.filter_native_logs()\n"
        "for line in (b'E0000 00:00:1733212482.1 1234 port.cc:153] oneDNN supports DT_INT64 '\n"
        "             b'only on platforms with AVX-512',\n"
        "             b'W1203 08:03:13.098193 140479895804800 config_flags.py:686] x',\n"
        "             b'2026-12-03 07:54:42.123456: I tensorflow/core/x.cc:1] y',\n"
        "             b'Premature end of JPEG file', b'F0000 00:00:1.0 1 a.cc:1] fatal'):\n"
        "  os.write(2, line + b'\\n')\n"
        "print('error: a Python line', file=sys.stderr)\n")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, cwd=ROOT,
                         timeout=SAFETY_NET, check=False)
    self.assertEqual(out.returncode, 0, out.stderr)
    self.assertCountEqual(out.stderr.decode().splitlines(), [
        "Premature end of JPEG file", "F0000 00:00:1.0 1 a.cc:1] fatal",
        "error: a Python line"])

  def test_train_and_translate_print_no_native_log_lines(self):
    tmp = tempfile.mkdtemp()
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    run = os.path.join(tmp, "run")
    for args, stdin in ((["train", f"--run_dir={run}", "--config.data.train_size=200",
                          "--config.train.steps=2", "--config.train.eval_every=2",
                          "--config.model.encoder_units=8", "--config.model.decoder_units=8",
                          "--config.model.embedding_dim=8"], None),
                        (["translate", f"--run_dir={run}"], "the boy helps the king\n")):
      out = subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), *args], input=stdin,
                           capture_output=True, text=True, env=env, cwd=tmp, timeout=SAFETY_NET,
                           check=False)
      self.assertEqual(out.returncode, 0, out.stderr[-2000:])
      native = [line for line in out.stderr.splitlines()
                if console.is_native_log(line.encode())]
      self.assertEmpty(native, args[0])


if __name__ == "__main__":
  tf.test.main()
