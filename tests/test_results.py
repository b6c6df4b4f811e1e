"""`run.py results` (train, evaluate greedy and beam 5, results.json) and `run.py report`
(docs/RESULTS.md tables and figures) on a tiny run."""

import json
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest
import tensorflow as tf

from absl.testing import flagsaver

from nmt_tf import cpu
from nmt_tf.cli import report as report_cli
from nmt_tf.cli import results as results_cli
from nmt_tf.evaluation import results
from nmt_tf.evaluation import significance
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
    self.assertEqual(row["train"]["progress"]["readings"], 4)  # log_every=5 of 20 steps
    self.assertGreater(row["train"]["progress"]["tokens_per_sec_median"], 0)
    self.assertEqual(sorted(row["scores"]), ["beam5", "greedy"])
    self.assertEqual(row["scores"]["greedy"]["beam_size"], 1)
    self.assertEqual(row["scores"]["beam5"]["beam_size"], 5)
    self.assertIn("nrefs:1", row["scores"]["beam5"]["bleu_signature"])
    self.assertEqual(row["test_sentences"], 8)
    self.assertTrue(row["command"].startswith("python run.py "))
    self.assertEqual(row["machine"], cpu.machine_label())  # where it trained (machine.json)
    self.assertEqual(row["cpu"], cpu.cpu_id())
    self.assertNotIn("resumed_on", row)
    with open(os.path.join(self.run_dir, results_cli.MACHINE_FILE), encoding="utf-8") as f:
      self.assertEqual(json.load(f)["machine"], row["machine"])
    self.assertTrue(os.path.isfile(os.path.join(self.run_dir, "eval", "test_beam5",
                                                "hypotheses.txt")))
    stats = significance.read_statistics(results.statistics_path(
        dict(row, run_dir=self.run_dir), "beam5"))
    self.assertLen(stats["bleu"], 8)
    self.assertAllClose(significance.corpus_score(stats, "bleu"), row["scores"]["beam5"]["bleu"])
    counts = np.asarray(stats["bleu"])  # [sentences, (hypothesis length, reference length, ...)]
    self.assertAllClose(row["scores"]["beam5"]["bleu_length_ratio"],
                        counts[:, 0].sum() / counts[:, 1].sum())

  def test_report_keeps_hand_written_text(self):
    self.assertEqual(self.code, 0, self.err)
    report_file = os.path.join(self.tmp, "RESULTS.md")
    figures = os.path.join(self.tmp, "figures")
    with open(report_file, "w", encoding="utf-8") as f:
      f.write(f"# Results\n\nintro\n\n{results.BEGIN}\nold table\n{results.END}\n\noutro\n")
    for _ in range(2):  # a second report replaces the generated part, keeps the rest
      code, out, err = run_command(report_cli, report_runs=[self.rows_dir],
                                   report_file=report_file, report_figures=figures,
                                   report_published="")
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
    with open(os.path.join(self.run_dir, "results.json"), encoding="utf-8") as f:
      curves = f"curves_generated_{results.machine_slug(results.machine(json.load(f)))}.png"
    self.assertIn(f"(figures/{curves})", text)
    self.assertIn("BLEU no UNK", text)  # the word-vocabulary table
    self.assertIn(f"(figures/bleu_by_length_{curves[len('curves_'):]})", text)
    for name in (curves, "bleu_by_length_word.png", "attention_cgru_tiny_attention_0.png",
                 f"bleu_by_length_{curves[len('curves_'):]}"):
      with open(os.path.join(figures, name), "rb") as f:
        self.assertEqual(f.read(4), b"\x89PNG", name)

  def test_residual_comparison_at_equal_steps(self):
    self.assertEqual(self.code, 0, self.err)
    with open(os.path.join(self.run_dir, "results.json"), encoding="utf-8") as f:
      base = json.load(f)
    base["run_dir"] = self.run_dir
    sar = dict(base, name="sar_tiny", decoder="self_attentive_residual",
               model="self_attentive_residual (avg)")
    lines = results._residual_comparison([base, sar])  # pylint: disable=protected-access
    row = [line for line in lines if line.startswith("| `sar_tiny`")]
    self.assertLen(row, 1)
    points = results.validations(self.run_dir)[0]
    last = max(points)  # validated at steps 10 and 20
    self.assertEqual(sorted(points), [10, 20])
    self.assertIn(f"| `cgru_tiny` | {results.machine(base)} | ", row[0])  # rows of several machines
    self.assertIn(f"| +0.00 | 20 | 20 | {points[last][1]:.2f} (step 20) |", row[0])
    # Paired bootstrap p-values of BLEU and chrF2 from the rows' sentence statistics (the
    # same outputs: sacrebleu's p for a zero difference is 1 / 1001).
    self.assertTrue(row[0].endswith("| 0.001 | 0.001 |"), row[0])
    lost = dict(sar, run_dir=os.path.join(self.tmp, "no_such_row"))  # no hypotheses
    lines = results._residual_comparison([base, lost])  # pylint: disable=protected-access
    row = [line for line in lines if line.startswith("| `sar_tiny`")]
    self.assertTrue(row[0].endswith("| n/a | n/a |"), row[0])

  def test_statistics_of_rows_evaluated_without_them(self):
    """`run.py report` writes them from the hypotheses and the references of config.json."""
    self.assertEqual(self.code, 0, self.err)
    old = os.path.join(tempfile.mkdtemp(dir=self.tmp), "cgru_tiny")
    shutil.copytree(self.run_dir, old)
    with open(os.path.join(old, "results.json"), encoding="utf-8") as f:
      row = dict(json.load(f), run_dir=old)
    expected = significance.read_statistics(results.statistics_path(row, "greedy"))
    for key in ("greedy", "beam5"):
      os.remove(results.statistics_path(row, key))
    self.assertCountEqual(results.add_statistics(row), ["greedy", "beam5"])
    self.assertEqual(significance.read_statistics(results.statistics_path(row, "greedy")),
                     expected)
    self.assertEqual(results.add_statistics(row), [])  # nothing missing any more
    published = dict(row, run_dir=os.path.join(self.tmp, "no_config"))  # no config.json
    self.assertEqual(results.add_statistics(published), [])

  def test_length_ratio_of_rows_evaluated_without_it(self):
    """`run.py report` fills it in from the sentence statistics, in published rows too."""
    self.assertEqual(self.code, 0, self.err)
    work = tempfile.mkdtemp(dir=self.tmp)
    published = os.path.join(work, "rows")
    report = lambda runs: run_command(report_cli, report_runs=runs, report_published=published,
                                      report_file=os.path.join(work, "RESULTS.md"),
                                      report_figures=work)
    self.assertEqual(report([self.rows_dir])[0], 0)
    path = os.path.join(published, "cgru_tiny", "results.json")
    with open(path, encoding="utf-8") as f:
      row = json.load(f)
    expected = {k: v.pop("bleu_length_ratio") for k, v in row["scores"].items()}
    self.assertCountEqual(expected, ["greedy", "beam5"])
    with open(path, "w", encoding="utf-8") as f:  # as rows were published before CPU ids
      json.dump(row, f)
    old = dict(row, run_dir=os.path.dirname(path))
    self.assertCountEqual(results.add_length_ratio(old), ["greedy", "beam5"])
    self.assertEqual(results.add_length_ratio(old), [])  # nothing missing any more
    for key, ratio in expected.items():
      self.assertAllClose(old["scores"][key]["bleu_length_ratio"], ratio)
    code, _, err = report([])  # the published row alone
    self.assertEqual(code, 0, err)
    with open(os.path.join(work, "RESULTS.md"), encoding="utf-8") as f:
      text = f.read()
    self.assertIn("| chrF2 beam 5 | length ratio beam 5 | valid BLEU |", text)
    self.assertIn(f"| {row['scores']['beam5']['chrf']:.2f} | {expected['beam5']:.3f} | ", text)
    with open(path, encoding="utf-8") as f:
      self.assertAllClose({k: v["bleu_length_ratio"] for k, v in json.load(f)["scores"].items()},
                          expected)

  def test_row_keeps_validation_curve(self):
    self.assertEqual(self.code, 0, self.err)
    with open(os.path.join(self.run_dir, "results.json"), encoding="utf-8") as f:
      row = json.load(f)
    points, start = results.validations(self.run_dir)
    self.assertEqual(row["validation"], results.validation_points(points, start))
    self.assertEqual([p["step"] for p in row["validation"]], [10, 20])
    self.assertEqual(start, 0.0)  # minutes of the budget clock (valid/train_minutes)
    self.assertGreater(row["validation"][1]["minutes"], row["validation"][0]["minutes"])
    # Minutes are stored to two decimals: at most 0.005 above the clock they round.
    self.assertLessEqual(row["validation"][1]["minutes"],
                         row["train"]["train_seconds"] / 60.0 + 0.005)

  def test_published_rows_redraw_the_report_without_run_directories(self):
    """A fresh clone has docs/results/rows but no runs/: the report must come out the same."""
    self.assertEqual(self.code, 0, self.err)
    work = tempfile.mkdtemp(dir=self.tmp)
    figures = os.path.join(work, "figures")
    published = os.path.join(figures, "rows")  # as docs/results/rows in docs/results
    report_file = os.path.join(work, "RESULTS.md")
    code, out, err = run_command(report_cli, report_runs=[self.rows_dir],
                                 report_published=published, report_file=report_file,
                                 report_figures=figures)
    self.assertEqual(code, 0, err)
    self.assertIn("1 published", out)
    row_dir = os.path.join(published, "cgru_tiny")
    for name in ("results.json", "eval/test_greedy/hypotheses.txt",
                 "eval/test_beam5/hypotheses.txt", "eval/test_beam5/attention_0.png",
                 f"eval/test_greedy/{significance.STATS_FILE}",
                 f"eval/test_beam5/{significance.STATS_FILE}"):
      self.assertTrue(os.path.isfile(os.path.join(row_dir, name)), name)
    with open(os.path.join(row_dir, "results.json"), encoding="utf-8") as f:
      self.assertNotIn("run_dir", json.load(f))
    with open(report_file, encoding="utf-8") as f:
      first = f.read()
    self.assertIn("(figures/rows/cgru_tiny/eval/test_beam5/attention_0.png)", first)
    # Without the run directory: the same tables from the published row alone.
    code, out, err = run_command(report_cli, report_runs=[os.path.join(work, "no_runs")],
                                 report_published=published, report_file=report_file,
                                 report_figures=figures)
    self.assertEqual(code, 2)  # an explicit run directory that does not exist is an error
    self.assertIn("no such run directory", err)
    code, out, err = run_command(report_cli, report_runs=[], report_published=published,
                                 report_file=report_file, report_figures=figures)
    self.assertEqual(code, 0, err)
    self.assertIn("1 rows written", out)
    self.assertIn("0 published", out)
    with open(report_file, encoding="utf-8") as f:
      self.assertEqual(f.read(), first)

  def test_run_directory_wins_over_published_row(self):
    self.assertEqual(self.code, 0, self.err)
    published = tempfile.mkdtemp(dir=self.tmp)
    stale = os.path.join(published, "cgru_tiny")
    os.makedirs(stale)
    with open(os.path.join(self.run_dir, "results.json"), encoding="utf-8") as f:
      row = json.load(f)
    row["train"]["steps"] = 999
    with open(os.path.join(stale, "results.json"), "w", encoding="utf-8") as f:
      json.dump(row, f)
    rows = results.load_rows([self.rows_dir, published])
    self.assertLen(rows, 1)
    self.assertEqual(rows[0]["train"]["steps"], 20)
    self.assertEqual(rows[0]["run_dir"], self.run_dir)

  def test_notes_and_rows_without_times(self):
    self.assertEqual(self.code, 0, self.err)
    with open(os.path.join(self.run_dir, "results.json"), encoding="utf-8") as f:
      row = json.load(f)
    row["run_dir"] = self.run_dir
    lost = dict(row, name="lost_tiny", note="rebuilt by hand.",
                validation=[{"step": 10, "minutes": None, "bleu": 1.0}])
    text = results.render([row, dict(lost), dict(lost, name="lost_tiny2")],
                          os.path.join(self.tmp, "figures_notes"), "figures_notes")
    self.assertIn("- `lost_tiny`, `lost_tiny2`: rebuilt by hand.", text)
    curves = f"curves_generated_{results.machine_slug(results.machine(row))}.png"
    with open(os.path.join(self.tmp, "figures_notes", curves), "rb") as f:
      self.assertEqual(f.read(4), b"\x89PNG")

  def test_rows_of_other_machines_are_kept_apart(self):
    """Budgets are wall-clock time: a table, its curves and the residual comparison hold the
    rows of one machine; the same row name trained on two machines is published twice."""
    self.assertEqual(self.code, 0, self.err)
    with open(os.path.join(self.run_dir, "results.json"), encoding="utf-8") as f:
      row = json.load(f)
    row["run_dir"] = self.run_dir
    here = results.machine(row)  # "<label> [<cpu id>]"
    self.assertEqual(here, f"{row['machine']} [{row['cpu']}]")
    sar = dict(row, name="sar_tiny", decoder="self_attentive_residual",
               model="self_attentive_residual (avg)")
    old = dict(row, machine="2 CPUs Old Box", cpu=None)  # from before CPU ids: the label
    old_sar = dict(sar, machine="2 CPUs Old Box", cpu=None)
    figures = os.path.join(self.tmp, "figures_machines")
    text = results.render([row, sar, old_sar], figures, "f")
    self.assertIn(f"### generated, {here}: test split", text)
    self.assertIn("### generated, 2 CPUs Old Box: test split", text)
    self.assertTrue(os.path.isfile(os.path.join(figures, "curves_generated_2-cpus-old-box.png")))
    comparison = [l for l in text.splitlines() if l.startswith("| `sar_tiny`")
                  and "`cgru_tiny`" in l]
    self.assertLen(comparison, 1)  # the old machine's sar row has no baseline there
    self.assertIn(f"| `cgru_tiny` | {here} | ", comparison[0])
    self.assertIn(f"### Attention of `cgru_tiny` (beam 5, test sentences, {here})", text)
    # The tables' last column: beam-5 BLEU against the cgru row of the same machine (with the
    # paired bootstrap p-value; the same outputs here); none for cgru or without a baseline.
    lines = [l for l in text.splitlines() if l.startswith(("| `sar_tiny`", "| `cgru_tiny`"))
             and "| word |" in l]
    self.assertLen(lines, 3)
    old_sar_line = lines.pop(-1 if here < "2 CPUs Old Box" else 0)  # tables sorted by machine
    self.assertTrue(old_sar_line.endswith("| - |"), old_sar_line)
    self.assertTrue(lines[0].startswith("| `cgru_tiny`") and lines[0].endswith("| - |"))
    self.assertTrue(lines[1].endswith("| +0.00 (p 0.001) |"), lines[1])
    published = os.path.join(self.tmp, "published_machines")
    first = results.publish(old, published)
    second = results.publish(row, published)
    self.assertEqual(first, os.path.join(published, "cgru_tiny"))
    self.assertEqual(second, os.path.join(published, "cgru_tiny@" + results.machine_slug(here)))
    self.assertEqual(results.publish(row, published), second)  # the same machine: in place
    loaded = results.load_rows([published])
    self.assertCountEqual([results.machine(r) for r in loaded], [here, "2 CPUs Old Box"])

  def test_two_cpus_of_one_label_are_two_machines(self):
    """Two VMs of one label differed 1.7x in speed: rows of two CPU ids get a table each, are
    not compared with each other and are published apart; a row published again goes back
    into its own directory."""
    self.assertEqual(self.code, 0, self.err)
    with open(os.path.join(self.run_dir, "results.json"), encoding="utf-8") as f:
      row = dict(json.load(f), run_dir=self.run_dir)
    label = row["machine"]
    fast = dict(row, cpu="family 6 model 167 stepping 1")
    slow = dict(row, cpu="family 6 model 143 stepping 8")
    slow_sar = dict(slow, name="sar_tiny", decoder="self_attentive_residual",
                    model="self_attentive_residual (avg)")
    unknown = dict(row, cpu=None)  # a row from before CPU ids: its label
    figures = os.path.join(self.tmp, "figures_cpus")
    text = results.render([fast, slow, slow_sar, unknown], figures, "f")
    for place in (f"{label} [family 6 model 167 stepping 1]",
                  f"{label} [family 6 model 143 stepping 8]", label):
      self.assertIn(f"### generated, {place}: test split", text)
      self.assertTrue(os.path.isfile(os.path.join(
          figures, f"curves_generated_{results.machine_slug(place)}.png")), place)
    self.assertIs(results.baseline(slow_sar, [fast, unknown, slow_sar, slow]), slow)
    self.assertIsNone(results.baseline(slow_sar, [fast, unknown, slow_sar]))
    published = os.path.join(self.tmp, "published_cpus")
    places = [results.publish(r, published) for r in (fast, slow, unknown)]
    self.assertEqual(places, [os.path.join(published, "cgru_tiny")] + [
        os.path.join(published, "cgru_tiny@" + results.machine_slug(results.machine(r)))
        for r in (slow, unknown)])
    self.assertEqual([results.publish(r, published) for r in (unknown, slow, fast)],
                     places[::-1])  # each into its own directory
    loaded = results.load_rows([published])
    self.assertCountEqual([r.get("cpu") for r in loaded], [fast["cpu"], slow["cpu"], None])

  def test_word_table_compares_attention_with_encdec(self):
    """Bahdanau et al.'s comparison: each word row against the encdec row of the same length
    limit, budget, seed and machine (paired bootstrap p; the same outputs here)."""
    self.assertEqual(self.code, 0, self.err)
    with open(os.path.join(self.run_dir, "results.json"), encoding="utf-8") as f:
      row = json.load(f)
    row["run_dir"] = self.run_dir
    encdec = dict(row, name="encdec_tiny", decoder="encdec", model="encdec")
    rnnsearch = dict(row, name="rnnsearch_tiny", decoder="rnnsearch", model="rnnsearch")
    other_length = dict(rnnsearch, name="rnnsearch_tiny30", max_length=30)
    text = results.render([encdec, rnnsearch, other_length],
                          os.path.join(self.tmp, "figures_word"), "f")
    table = text.split("### Fixed context against attention")[1].split("###")[0]
    lines = {l.split("`")[1]: l for l in table.splitlines() if l.startswith("| `")}
    self.assertTrue(lines["encdec_tiny"].endswith("| - |"), lines["encdec_tiny"])
    self.assertTrue(lines["rnnsearch_tiny"].endswith("| +0.00 (p 0.001) |"),
                    lines["rnnsearch_tiny"])
    self.assertTrue(lines["rnnsearch_tiny30"].endswith("| - |"))  # no encdec-30 row
    self.assertIn(f"| {results.machine(row)} |", lines["rnnsearch_tiny"])

  def test_word_figure_keeps_rows_of_two_machines_apart(self):
    """The same model and length limit from two machines are two series of the figure."""
    self.assertEqual(self.code, 0, self.err)
    with open(os.path.join(self.run_dir, "results.json"), encoding="utf-8") as f:
      row = json.load(f)
    here = results.machine(row)
    old = dict(row, machine="2 CPUs Old Box", cpu=None)
    model = f"cgru-{row.get('max_length') or 'all'}"
    series = results._word_series([row])  # pylint: disable=protected-access
    self.assertEqual(list(series), [f"{model} (generated)"])
    series = results._word_series([row, old])  # pylint: disable=protected-access
    self.assertEqual(list(series), [f"{model} (generated, {here})",
                                    f"{model} (generated, 2 CPUs Old Box)"])
    series = results._word_series([row, dict(row, name="cgru_tiny_seed2")])  # pylint: disable=protected-access
    self.assertEqual(list(series), [f"{model} (generated)",
                                    f"{model} (generated) [cgru_tiny_seed2]"])
    self.assertEqual(series[f"{model} (generated)"],
                     results._buckets(row["scores"]["beam5"]))  # pylint: disable=protected-access

  def test_report_deletes_the_figures_it_no_longer_draws(self):
    self.assertEqual(self.code, 0, self.err)
    with open(os.path.join(self.run_dir, "results.json"), encoding="utf-8") as f:
      row = dict(json.load(f), run_dir=self.run_dir)
    figures = os.path.join(self.tmp, "figures_stale")
    os.makedirs(os.path.join(figures, "rows"))
    kept = ["notes.png", "table.txt", os.path.join("rows", "curves_of_a_row.png")]
    stale = ["curves_generated_2-cpus-old-box.png", "bleu_by_length.png"]
    for name in kept + stale:
      with open(os.path.join(figures, name), "wb") as f:
        f.write(b"x")
    results.write_report([row], os.path.join(self.tmp, "RESULTS_stale.md"), figures)
    for name in kept:
      self.assertTrue(os.path.isfile(os.path.join(figures, name)), name)
    for name in stale:
      self.assertFalse(os.path.exists(os.path.join(figures, name)), name)
    curves = f"curves_generated_{results.machine_slug(results.machine(row))}.png"
    for name in (curves, "bleu_by_length_word.png"):
      with open(os.path.join(figures, name), "rb") as f:
        self.assertEqual(f.read(4), b"\x89PNG", name)

  def test_errors(self):
    code, _, err = run_command(results_cli, results_beams=["0"])
    self.assertEqual(code, 2)
    self.assertIn("--results_beams", err)
    code, _, err = run_command(report_cli, report_runs=[os.path.join(self.tmp, "nothing")])
    self.assertEqual(code, 2)
    self.assertIn("no such run directory", err)


class RowMachineTest(tf.test.TestCase):
  """A row's time budget is spent on one machine: RUN/machine.json names it."""

  def began_elsewhere(self, **record):
    run_dir = os.path.join(tempfile.mkdtemp(), "cgru_tiny")
    os.makedirs(run_dir)
    record = dict({"machine": "2 CPUs Old Box (family 1, AVX2)", "date": "2026-01-01"}, **record)
    with open(os.path.join(run_dir, results_cli.MACHINE_FILE), "w", encoding="utf-8") as f:
      json.dump(record, f)
    return run_dir

  def refused_resume(self, run_dir):
    """Runs `run.py results` on run_dir, checks that it is refused before anything is
    trained (exit code 2) and returns the error text."""
    code, _, err = run_command(results_cli, config=json.loads(
        tiny_train_config(steps=2).to_json()), run_dir=run_dir)
    self.assertEqual(code, 2)
    self.assertEqual(os.listdir(run_dir), [results_cli.MACHINE_FILE])  # nothing trained
    return err

  def test_resume_on_another_machine_is_refused(self):
    err = self.refused_resume(self.began_elsewhere())
    self.assertIn('began training on "2 CPUs Old Box (family 1, AVX2)"', err)
    self.assertIn("--results_other_machine", err)

  def test_resume_on_another_machine_when_asked(self):
    run_dir = self.began_elsewhere()
    here = cpu.machine_label()
    for _ in range(2):  # listed once however often it resumes here
      with flagsaver.flagsaver(results_other_machine=True):
        record = results_cli._training_machine(run_dir)  # pylint: disable=protected-access
        self.assertEqual(record["machine"], "2 CPUs Old Box (family 1, AVX2)")
        self.assertEqual(record["resumed_on"],  # what the row's results.json lists
                         [cpu.machine_name(here, cpu.cpu_id())])
    with open(os.path.join(run_dir, results_cli.MACHINE_FILE), encoding="utf-8") as f:
      self.assertEqual(json.load(f), record)

  def test_same_label_other_cpu_is_refused(self):
    """Two VMs of one label differed 1.7x in speed: the CPU id tells them apart."""
    here = cpu.machine_label()
    err = self.refused_resume(self.began_elsewhere(machine=here,
                                                   cpu="family 6 model 1 stepping 0"))
    self.assertIn(f'began training on "{here} [family 6 model 1 stepping 0]", this machine is '
                  f'"{cpu.machine_name(here, cpu.cpu_id())}"', err)
    run_dir = self.began_elsewhere(machine=here, cpu=cpu.cpu_id())  # this CPU: resumes
    record = results_cli._training_machine(run_dir)  # pylint: disable=protected-access
    self.assertEqual(record["machine"], here)
    self.assertNotIn("resumed_on", record)

  def test_record_without_cpu_id_is_another_machine(self):
    """A run begun before CPU ids were recorded ran on an unknown VM of its
    label: it resumes only when asked."""
    here = cpu.machine_label()
    err = self.refused_resume(self.began_elsewhere(machine=here, cpu=None))
    self.assertIn(f'began training on "{here}", this machine is '
                  f'"{cpu.machine_name(here, cpu.cpu_id())}"', err)

  def test_new_run_records_this_machine(self):
    run_dir = os.path.join(tempfile.mkdtemp(), "new_row")
    record = results_cli._training_machine(run_dir)  # pylint: disable=protected-access
    self.assertEqual(record["machine"], cpu.machine_label())
    self.assertEqual(record["cpu"], cpu.cpu_id())
    self.assertNotIn("resumed_on", record)
    with open(os.path.join(run_dir, results_cli.MACHINE_FILE), encoding="utf-8") as f:
      saved = json.load(f)
    self.assertEqual(saved, record)
    self.assertNotIn("recorded_at_resume", saved)


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
        self.assertEqual("--config.train.max_minutes=60" in line, name.endswith("en-de"), line)
        self.assertEqual("_word.py" in config, "_word_" in name, line)
    # The baseline first, then the rows of the comparisons that have none, then the models
    # with no row on any machine (RESULTS.md, "Budgets and order").
    self.assertEqual(list(rows)[:7],
                     ["cgru_de-en", "encdec50_word_de-en", "rnnsearch50_word_de-en",
                      "encdec30_word_de-en", "rnnsearch30_word_de-en", "memory_rnn_de-en",
                      "self_attentive_rnn_de-en"])
    # Last, the de->en rows that have rows from the Intel machine.
    self.assertEqual(list(rows)[-2:], ["rnnsearch_de-en", "encdec_de-en"])

  def test_row_without_its_baseline_on_this_machine_is_refused(self):
    """In an empty checkout (no rows run or published) sar_avg_de-en alone needs cgru_de-en
    first; with the baseline queued before it, it runs (dry run)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    empty = tempfile.mkdtemp()
    shutil.copytree(os.path.join(root, "scripts"), os.path.join(empty, "scripts"))
    shutil.copytree(os.path.join(root, "nmt_tf"), os.path.join(empty, "nmt_tf"))
    script = os.path.join(empty, "scripts", "run_results.sh")
    run = lambda rows, *args: subprocess.run(["bash", script, *args], capture_output=True,
                                             text=True, env=dict(os.environ, ROWS=rows))
    refused = run("sar_avg_de-en")  # not a dry run: refused before anything starts
    self.assertEqual(refused.returncode, 1)
    self.assertIn("cgru_de-en, its baseline, has no row from this machine", refused.stderr)
    self.assertIn('ROWS="cgru_de-en sar_avg_de-en"', refused.stderr)
    self.assertFalse(os.path.exists(os.path.join(empty, "runs")))
    dry = run("sar_avg_de-en", "--dry_run")
    self.assertEqual(dry.returncode, 0, dry.stderr)
    self.assertIn("refused unless ALLOW_NO_BASELINE=1", dry.stdout)
    self.assertIn("0 row(s) to run", dry.stdout)
    for rows, env in (("cgru_de-en sar_avg_de-en", ""), ("sar_avg_de-en", "1")):
      queued = subprocess.run(["bash", script, "--dry_run"], capture_output=True, text=True,
                              env=dict(os.environ, ROWS=rows, ALLOW_NO_BASELINE=env))
      self.assertIn("row sar_avg_de-en: .venv/bin/python run.py results", queued.stdout)

  def copy_of_project(self):
    """scripts/ and nmt_tf/ of this project in an empty directory (no rows run or published)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    empty = tempfile.mkdtemp()
    for name in ("scripts", "nmt_tf"):
      shutil.copytree(os.path.join(root, name), os.path.join(empty, name))
    return empty

  def publish_row(self, project, name, row_cpu, machine=None, slug=""):
    """Writes docs/results/rows/<name><slug>/results.json as published from `machine` (this
    label by default) and CPU id `row_cpu`."""
    published = os.path.join(project, "docs", "results", "rows", name + slug)
    os.makedirs(published, exist_ok=True)
    with open(os.path.join(published, "results.json"), "w", encoding="utf-8") as f:
      json.dump({"name": name, "machine": machine or cpu.machine_label(), "cpu": row_cpu}, f)

  def test_baseline_from_another_cpu_of_this_label_is_refused(self):
    """A published cgru_de-en row of this machine's label counts as its baseline only when it
    records this CPU id: not another one, nor none (a row from before CPU ids)."""
    project = self.copy_of_project()
    script = os.path.join(project, "scripts", "run_results.sh")
    run = lambda *args: subprocess.run(["bash", script, *args], capture_output=True, text=True,
                                       env=dict(os.environ, ROWS="sar_avg_de-en"))
    for row_cpu, shown in (("family 6 model 1 stepping 0", "family 6 model 1 stepping 0"),
                           (None, "no CPU id recorded")):
      self.publish_row(project, "cgru_de-en", row_cpu)
      why = ("cgru_de-en, its baseline, was trained on another CPU of this machine's label "
             f"({shown}; this one is {cpu.cpu_id()}), whose speed may differ")
      refused = run()  # not a dry run: refused before anything starts
      self.assertEqual(refused.returncode, 1)
      self.assertIn(f"{why}; set ALLOW_NO_BASELINE=1 to compare with it anyway", refused.stderr)
      dry = run("--dry_run")
      self.assertEqual(dry.returncode, 0, dry.stderr)
      self.assertIn(f"{why}: refused unless ALLOW_NO_BASELINE=1", dry.stdout)
    self.publish_row(project, "cgru_de-en", cpu.cpu_id())  # this CPU: the baseline
    dry = run("--dry_run")
    self.assertIn("row sar_avg_de-en: .venv/bin/python run.py results", dry.stdout)
    self.assertFalse(os.path.exists(os.path.join(project, "runs")))  # nothing started

  def test_published_row_is_done_only_from_this_cpu(self):
    """A row published from this label and CPU id is done here; one from another CPU id of
    the label, from before CPU ids, or from another label is trained again."""
    project = self.copy_of_project()
    script = os.path.join(project, "scripts", "run_results.sh")
    dry = lambda: subprocess.run(["bash", script, "--dry_run"], capture_output=True, text=True,
                                 env=dict(os.environ, ROWS="cgru_de-en"), check=True).stdout
    for row_cpu in ("family 6 model 1 stepping 0", None):
      self.publish_row(project, "cgru_de-en", row_cpu)
      self.assertIn("row cgru_de-en: .venv/bin/python run.py results", dry())
    self.publish_row(project, "cgru_de-en", cpu.cpu_id(), machine="2 CPUs Old Box")
    self.assertIn("row cgru_de-en: ", dry())
    # Beside another machine's row, as `run.py report` publishes it (results.publish).
    self.publish_row(project, "cgru_de-en", cpu.cpu_id(), slug="@this-machine")
    self.assertIn("done: cgru_de-en (published)", dry())
