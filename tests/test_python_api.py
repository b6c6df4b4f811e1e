"""The installed package: `import nmt_tf` stays light, the README's Python example runs as
written, `nmt_tf.load(...).translate / .score` and `nmt_tf.train`, the `nmt-tf` command and
recipes named without a path."""

import contextlib
import importlib
import io
import os
import pkgutil
import re
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import tensorflow as tf

import nmt_tf
from nmt_tf import cli
from nmt_tf import configs
from nmt_tf.cli import app
from tests.run_fixtures import make_tiny_run
from tests.training_fixtures import tiny_train_config
from tests.waits import SAFETY_NET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")


def readme_example():
  """The Python code block that follows `<!-- api-example -->` in README.md."""
  with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    text = f.read()
  match = re.search(r"<!-- api-example -->\s*```python\n(.*?)```", text, re.DOTALL)
  return match.group(1)


@pytest.mark.slow  # trains a run
class PythonApiTest(tf.test.TestCase):
  """A tiny run at <tmp>/runs/quickstart, the path the README's example loads."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    cls.tiny_run, _, cls.corpus = make_tiny_run(os.path.join(cls.root, "runs", "quickstart"))
    cls.model = nmt_tf.load(cls.tiny_run.path)

  def test_readme_example_runs_as_written(self):
    code = readme_example()
    self.assertIn('nmt_tf.load("runs/quickstart")', code)
    cwd, out = os.getcwd(), io.StringIO()
    os.chdir(self.root)
    try:
      with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})  # pylint: disable=exec-used
    finally:
      os.chdir(cwd)
    lines = out.getvalue().splitlines()
    self.assertLen(lines, 5)
    self.assertRegex(lines[1], r"^\(\d+, \d+\)$")
    self.assertRegex(lines[4], r"^\[-?\d+\.\d+(, -?\d+\.\d+)*\]$")  # word confidence

  def test_translate(self):
    sentences = list(self.corpus["test"].sources[:3]) + [""]
    results = self.model.translate(sentences, beam_size=3, nbest=2)
    self.assertLen(results, 4)
    for t in results[:3]:
      self.assertIsInstance(t, nmt_tf.Translation)
      self.assertEqual(t.alignment.shape, (len(t.target_tokens), len(t.source_tokens)))
      self.assertEqual(t.source_tokens[-1], "</s>")
      self.assertLessEqual(len(t.alternatives), 1)
      self.assertGreaterEqual(t.score, max([a.score for a in t.alternatives], default=-np.inf))
    self.assertEqual((results[3].text, results[3].alternatives), ("", []))
    greedy = self.model.translate(sentences[:3], beam_size=1)
    self.assertEqual([t.alternatives for t in greedy], [[], [], []])
    with self.assertRaisesRegex(ValueError, "nbest=4"):
      self.model.translate(sentences, beam_size=3, nbest=4)

  def test_shortlist(self):
    sentences = list(self.corpus["test"].sources[:3])
    short = nmt_tf.load(self.tiny_run.path, shortlist=2).translate(sentences, beam_size=3)
    self.assertTrue(os.path.exists(os.path.join(self.tiny_run.path, "shortlist.npz")))
    self.assertLen(short, 3)
    # 100 translations per word and the 100 most frequent words hold the tiny vocabulary.
    whole = nmt_tf.load(self.tiny_run.path, shortlist=100).translate(sentences, beam_size=3)
    self.assertEqual([t.text for t in whole],
                     [t.text for t in self.model.translate(sentences, beam_size=3)])

  def test_score_is_the_translation_log_prob(self):
    sentences = list(self.corpus["test"].sources[:3])
    best = self.model.translate(sentences, beam_size=1)
    scores = self.model.score(sentences, [t.text for t in best])
    self.assertAllClose([s.log_prob for s in scores], [t.log_prob for t in best], atol=1e-4)
    self.assertEqual([s.num_tokens for s in scores], [len(t.target_tokens) for t in best])

  def test_one_string_gives_one_result(self):
    sentence = self.corpus["test"].sources[0]
    single = self.model.translate(sentence, beam_size=1)
    self.assertIsInstance(single, nmt_tf.Translation)
    self.assertEqual(single.text, self.model.translate([sentence], beam_size=1)[0].text)
    score = self.model.score(sentence, single.text)
    self.assertAllClose(score.log_prob, single.log_prob, atol=1e-4)
    self.assertEqual(score.num_tokens, len(single.target_tokens))

  def test_wrong_arguments_name_what_is_wrong(self):
    sentence = self.corpus["test"].sources[0]
    for sentences, message in (([None], r"sentences\[0\]=None \(NoneType\); expected a str"),
                               ([sentence, 5], r"sentences\[1\]=5 \(int\); expected a str"),
                               (b"ein Hund", "as bytes"), (7, "sentences=7; expected a str")):
      with self.assertRaisesRegex(TypeError, message):
        self.model.translate(sentences)
    for kwargs, message in ((dict(beam_size=2.5), "beam_size=2.5; expected a positive integer"),
                            (dict(beam_size=-3), "beam_size=-3; expected a positive integer"),
                            (dict(beam_size=0), "beam_size=0; expected a positive integer"),
                            (dict(nbest=0), "nbest=0; expected a positive integer"),
                            (dict(batch_size=-1), "batch_size=-1; expected a positive"),
                            (dict(beam_size=10**9), "Received beam_size=1000000000: its search "
                             "of one .* would need about .* GiB, more than half of the .* GiB "
                             "of memory available; use a smaller beam")):
      with self.assertRaisesRegex(ValueError, message):
        self.model.translate([sentence], **kwargs)
    for sentences, where in ((["a\udcff"], r"sentences\[0\]"), ("a\udcff", "sentences")):
      with self.assertRaisesRegex(ValueError, f"^Received {where} with the lone surrogate "
                                  r"'\\udcff' at position 1, which is no character; decode "
                                  "its bytes with errors='replace'"):
        self.model.translate(sentences)
    with self.assertRaisesRegex(TypeError, "one of sources and targets as a str"):
      self.model.score(sentence, [sentence])
    with self.assertRaisesRegex(TypeError, r"targets\[0\]=None"):
      self.model.score([sentence], [None])
    with self.assertRaisesRegex(ValueError, "1 sources and 2 translations"):
      self.model.score([sentence], [sentence, sentence])

  def test_train_from_a_config_object(self):
    run_dir = os.path.join(self.root, "trained")
    summary = nmt_tf.train(tiny_train_config(steps=3, eval_every=3, checkpoint_every=3),
                           run_dir)
    self.assertEqual(summary["steps"], 3)
    self.assertEqual(nmt_tf.load(run_dir).translate(["a"])[0].source_tokens[-1], "</s>")


@pytest.mark.slow  # starts processes
class PackageTest(tf.test.TestCase):

  def test_import_is_light(self):
    out = subprocess.run([sys.executable, "-c", "import sys, nmt_tf; "
                          "print('tensorflow' in sys.modules, nmt_tf.__version__)"],
                         capture_output=True, text=True, env=ENV, cwd=ROOT, check=True)
    self.assertEqual(out.stdout.split(), ["False", nmt_tf.__version__])

  def test_nmt_tf_command_is_installed(self):
    command = os.path.join(os.path.dirname(sys.executable), "nmt-tf")
    self.assertTrue(os.path.exists(command), "run scripts/setup_env.sh (pip install -e .)")
    out = subprocess.run([command, "help"], capture_output=True, text=True, env=ENV,
                         cwd=tempfile.mkdtemp(), timeout=SAFETY_NET, check=False)
    self.assertEqual(out.returncode, 0, out.stderr[-2000:])
    self.assertIn("usage: nmt-tf COMMAND", out.stdout)
    self.assertIn("translate", out.stdout)

  def test_the_lists_of_commands_and_recipes_answer_without_tensorflow(self):
    """`nmt-tf`, `nmt-tf help`, `nmt-tf --help`, an unknown command and `nmt-tf recipes`
    import neither TensorFlow nor the other command modules."""
    program = ("import sys\n"
               "from nmt_tf.cli import app\n"
               "sys.argv = ['nmt-tf'] + sys.argv[1:]\n"
               "try:\n"
               "  app.run()\n"
               "finally:\n"
               "  print(sorted(m for m in sys.modules if m == 'tensorflow' or\n"
               "               m.startswith('nmt_tf.cli.') and m not in\n"
               "               ('nmt_tf.cli.app', 'nmt_tf.cli.help')))\n")
    for args, code in (([], 2), (["help"], 0), (["--help"], 0), (["-h"], 0)):
      out = subprocess.run([sys.executable, "-c", program] + args, capture_output=True,
                           text=True, env=ENV, cwd=ROOT, timeout=SAFETY_NET, check=False)
      self.assertEqual(out.returncode, code, (args, out.stderr[-2000:]))
      self.assertEqual(out.stdout.splitlines()[-1], "[]", args)
      listing = out.stdout if code == 0 or not args else out.stderr
      self.assertIn("usage: nmt-tf COMMAND", listing, args)
      for name, summary in cli.SUMMARIES.items():
        self.assertIn(f"\n  {name:<10} {summary}\n", listing)
    # An unknown command is one error line naming the fix.
    out = subprocess.run([sys.executable, "-c", program, "trian"], capture_output=True,
                         text=True, env=ENV, cwd=ROOT, timeout=SAFETY_NET, check=False)
    self.assertEqual(out.returncode, 2)
    self.assertEqual(out.stdout.splitlines()[-1], "[]")
    self.assertEqual(out.stderr, "error: unknown command 'trian'; `nmt-tf help` lists the "
                     "commands.\n")
    # `nmt-tf recipes` reads the recipes' docstrings and the presets without TensorFlow.
    out = subprocess.run([sys.executable, "-c", program, "recipes"], capture_output=True,
                         text=True, env=ENV, cwd=ROOT, timeout=SAFETY_NET, check=False)
    self.assertEqual((out.returncode, out.stderr), (0, ""))
    self.assertEqual(out.stdout.splitlines()[-1], "['nmt_tf.cli.recipes']")
    self.assertEqual(out.stdout.splitlines()[:-1], configs.listing())

  def test_every_command_module_is_in_the_list_and_the_list_holds_no_other(self):
    modules = {info.name: importlib.import_module(f"nmt_tf.cli.{info.name}")
               for info in pkgutil.iter_modules(cli.__path__)}
    commands = {name: module for name, module in modules.items() if hasattr(module, "COMMAND")}
    self.assertEqual(sorted(commands), sorted(cli.SUMMARIES))
    self.assertEqual({name: module.COMMAND for name, module in commands.items()},
                     {name: name for name in commands})
    self.assertEqual(cli.commands(), commands)

  def test_output_into_a_closed_pipe_ends_quietly(self):
    command = os.path.join(os.path.dirname(sys.executable), "nmt-tf")
    buffered = {k: v for k, v in ENV.items() if k != "PYTHONUNBUFFERED"}
    for env in (buffered, dict(buffered, PYTHONUNBUFFERED="1")):  # written at exit, or at once
      process = subprocess.Popen([command, "translate", "--help"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=env)
      process.stdout.close()  # long before the command writes: it starts TensorFlow first
      _, err = process.communicate(timeout=SAFETY_NET)
      self.assertEqual((process.returncode, err.decode()), (1, ""), env.get("PYTHONUNBUFFERED"))

  def test_command_help_lists_its_flags_and_the_config_fields(self):
    command = os.path.join(os.path.dirname(sys.executable), "nmt-tf")
    out = subprocess.run([command, "train", "--help"], capture_output=True, text=True, env=ENV,
                         timeout=SAFETY_NET, check=False)
    self.assertEqual(out.returncode, 0, out.stderr[-2000:])
    self.assertEqual(out.stderr, "")  # no TensorFlow start-up lines either
    for text in ("usage: nmt-tf train", "train flags:", "--restart_from_scratch=false",
                 "--run_dir=runs/quickstart", "config fields", "  train:", "    steps=2000",
                 "attention_mode='soft'  soft | hard (Xu et al. 2015; trained with REINFORCE)",
                 "recipes (--config=RECIPE[:MODEL]", "  multi30k_word ", "  sar_cavg "):
      self.assertIn(text, out.stdout)
    self.assertNotIn("--pdb", out.stdout)  # nothing unrelated (absl's own flags)
    out = subprocess.run([command, "translate", "--help"], capture_output=True, text=True,
                         env=ENV, timeout=SAFETY_NET, check=False)
    self.assertIn("--input_file=-", out.stdout)
    self.assertNotIn("config fields", out.stdout)

  def test_recipes_command_and_a_model_preset_by_name(self):
    command = os.path.join(os.path.dirname(sys.executable), "nmt-tf")
    out = subprocess.run([command, "recipes"], capture_output=True, text=True, env=ENV,
                         timeout=SAFETY_NET, check=False)
    self.assertEqual((out.returncode, out.stderr), (0, ""))
    self.assertStartsWith(out.stdout, "recipes (--config=RECIPE[:MODEL]")
    self.assertIn("  wmt14 ", out.stdout)
    # RECIPE:MODEL reaches get_config through ml_collections.
    run_dir = os.path.join(tempfile.mkdtemp(), "run")
    out = subprocess.run(
        [command, "train", "--config=generated:luong", f"--run_dir={run_dir}",
         "--config.data.train_size=40", "--config.data.valid_size=4",
         "--config.data.test_size=4", "--config.model.embedding_dim=8",
         "--config.model.encoder_units=8", "--config.model.decoder_units=8",
         "--config.train.steps=1", "--config.train.eval_every=1",
         "--config.train.checkpoint_every=1", "--config.decode.beam_size=1"],
        capture_output=True, text=True, env=ENV, timeout=SAFETY_NET, check=False)
    self.assertEqual((out.returncode, out.stderr), (0, ""))
    with open(os.path.join(run_dir, "config.json"), encoding="utf-8") as f:
      config = nmt_tf.ExperimentConfig.from_json(f.read())
    self.assertEqual(config.model.decoder, "luong")
    # RECIPE:MODEL becomes the recipe file's path and the model, silently.
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
      argv = app._recipe_names(["train", "--config=generated:sar_cavg", "--run_dir=r"])
    self.assertEqual(argv[1], "--config=" + os.path.join(
        os.path.dirname(nmt_tf.__file__), "configs", "generated.py") + ":sar_cavg")
    self.assertEqual(stderr.getvalue(), "")


if __name__ == "__main__":
  tf.test.main()
