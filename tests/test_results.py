"""`run.py results` (train, evaluate greedy and beam 5, results.json) and `run.py report`
(docs/RESULTS.md tables and figures) on a tiny run."""

import json
import os
import subprocess
import tempfile

import pytest
import tensorflow as tf

from nmt_tf.cli import report as report_cli
from nmt_tf.cli import results as results_cli
from nmt_tf.evaluation import results
from tests.test_cli_decode import run_command
from tests.training_fixtures import tiny_train_config


@pytest.mark.slow  # trains a tiny model and decodes the test split twice (~1 min)
class ResultsTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    cls.rows_dir = os.path.join(cls.tmp, "results")
    cls.run_dir = os.path.join(cls.rows_dir, "cgru_tiny")
    config = tiny_train_config(steps=20, eval_every=10, checkpoint_every=10)
    cls.code, cls.out, cls.err = run_command(
        results_cli, config=json.loads(config.to_json()), run_dir=cls.run_dir,
        plot_sentences=["0"])

  def test_row(self):
    self.assertEqual(self.code, 0, self.err)
    with open(os.path.join(self.run_dir, "results.json"), encoding="utf-8") as f:
      row = json.load(f)
    self.assertEqual(row["name"], "cgru_tiny")
    self.assertEqual(row["model"], "cgru")
    self.assertEqual(row["direction"], "generated")  # no languages: the dataset's name
    self.assertEqual(row["train"]["steps"], 20)
    self.assertGreater(row["train"]["train_seconds"], 0)
    self.assertBetween(row["train"]["cpu_seconds"], 0.01,
                       (os.cpu_count() or 1) * row["train"]["train_seconds"])
    self.assertEqual(sorted(row["scores"]), ["beam5", "greedy"])
    self.assertEqual(row["scores"]["greedy"]["beam_size"], 1)
    self.assertEqual(row["scores"]["beam5"]["beam_size"], 5)
    self.assertIn("nrefs:1", row["scores"]["beam5"]["bleu_signature"])
    self.assertEqual(row["test_sentences"], 8)
    self.assertTrue(row["command"].startswith("python run.py "))
    self.assertTrue(os.path.isfile(os.path.join(self.run_dir, "eval", "test_beam5",
                                                "hypotheses.txt")))

  def test_report_keeps_hand_written_text(self):
    self.assertEqual(self.code, 0, self.err)
    report_file = os.path.join(self.tmp, "RESULTS.md")
    figures = os.path.join(self.tmp, "figures")
    with open(report_file, "w", encoding="utf-8") as f:
      f.write(f"# Results\n\nintro\n\n{results.BEGIN}\nold table\n{results.END}\n\noutro\n")
    for _ in range(2):  # a second report replaces the generated part, keeps the rest
      code, out, err = run_command(report_cli, report_runs=[self.rows_dir],
                                   report_file=report_file, report_figures=figures)
      self.assertEqual(code, 0, err)
      self.assertIn("1 rows written", out)
    with open(report_file, encoding="utf-8") as f:
      text = f.read()
    self.assertTrue(text.startswith("# Results\n\nintro\n\n"))
    self.assertTrue(text.endswith("\n\noutro\n"))
    self.assertEqual(text.count(results.BEGIN), 1)
    self.assertNotIn("old table", text)
    self.assertIn("| `cgru_tiny` | cgru | word |", text)
    self.assertRegex(text, r"\| `cgru_tiny` \| cgru \| word \| [^|]+ \| 20 \| [^|]+ \| \d\.\d\d \|")
    self.assertIn("(figures/curves_generated.png)", text)
    self.assertIn("BLEU no UNK", text)  # the word-vocabulary table
    for name in ("curves_generated.png", "bleu_by_length.png", "attention_cgru_tiny_attention_0.png"):
      with open(os.path.join(figures, name), "rb") as f:
        self.assertEqual(f.read(4), b"\x89PNG", name)

  def test_residual_comparison_at_equal_steps(self):
    self.assertEqual(self.code, 0, self.err)
    with open(os.path.join(self.run_dir, "results.json"), encoding="utf-8") as f:
      base = json.load(f)
    base["run_dir"] = self.run_dir
    sar = dict(base, name="sar_tiny", decoder="self_attentive_residual",
               model="self_attentive_residual (avg)")
    events = {self.run_dir: results.validations(self.run_dir)}
    lines = results._residual_comparison([base, sar], events)  # pylint: disable=protected-access
    row = [line for line in lines if line.startswith("| `sar_tiny`")]
    self.assertLen(row, 1)
    points = results.validations(self.run_dir)[0]
    last = max(points)  # validated at steps 10 and 20
    self.assertEqual(sorted(points), [10, 20])
    self.assertIn(f"| +0.00 | 20 | 20 | {points[last][1]:.2f} (step 20) |", row[0])

  def test_errors(self):
    code, _, err = run_command(results_cli, results_beams=["0"])
    self.assertEqual(code, 2)
    self.assertIn("--results_beams", err)
    code, _, err = run_command(report_cli, report_runs=[os.path.join(self.tmp, "nothing")])
    self.assertEqual(code, 1)
    self.assertIn("no such run directory", err)


class AllRowsScriptTest(tf.test.TestCase):
  """scripts/run_results.sh --dry_run: every row of docs/RESULTS.md, each with a config."""

  def test_dry_run_lists_every_row(self):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, ROWS="")
    out = subprocess.run(["bash", os.path.join(root, "scripts", "run_results.sh"), "--dry_run"],
                         capture_output=True, text=True, check=True, env=env).stdout
    rows = {}
    for line in out.splitlines():
      if line.startswith("row "):
        rows[line.split(":")[0].split()[1]] = line
      elif line.startswith("done: "):
        rows[line.split()[1]] = line
    models = ["cgru", "sar_avg", "sar_cavg", "rnnsearch", "encdec", "luong", "memory_rnn",
              "self_attentive_rnn"]
    expected = ([f"{m}_de-en" for m in models] + [f"{m}_en-de" for m in models] +
                [f"{m}{n}_word_de-en" for m in ("encdec", "rnnsearch") for n in (30, 50)])
    self.assertCountEqual(rows, expected)
    for name, line in rows.items():
      if line.startswith("row "):
        config = line.split("--config=")[1].split()[0]
        self.assertTrue(os.path.exists(os.path.join(root, config)), line)
        self.assertIn(f"--run_dir=runs/results/{name}", line)
        self.assertEqual("--config.data.source_lang=en" in line, name.endswith("en-de"), line)
        self.assertEqual("max_source_len=30" in line, "30_word" in name, line)
