"""`run.py train` as real processes: config errors, SIGKILL and resume (at random moments, in a
checkpoint save, in validation), refusals with exit code 2, MirroredStrategy on two logical
CPUs, MultiWorkerMirroredStrategy with two workers on 127.0.0.1."""

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest
import tensorflow as tf

from nmt_tf import data
from tests.waits import SAFETY_NET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--config.data.train_size=600", "--config.data.valid_size=8",
        "--config.data.max_length=8", "--config.tokenizer.kind=word",
        "--config.tokenizer.vocab_size=200", "--config.model.embedding_dim=16",
        "--config.model.encoder_units=16", "--config.model.decoder_units=32",
        "--config.pipeline.batch_tokens=400", "--config.train.log_every=5",
        "--config.train.alignment_images=1", "--config.decode.beam_size=1",
        "--config.decode.max_length=20"]


def _cmd(run_dir, *extra):
  return [sys.executable, os.path.join(ROOT, "run.py"), "train", f"--run_dir={run_dir}",
          *TINY, *extra]


def _env(**extra):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **extra)
  env.pop("TF_CONFIG", None)
  env.update(extra)
  return env


def _free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


@pytest.mark.slow  # one process per error
class ConfigErrorTest(tf.test.TestCase):

  def _error(self, *flags):
    proc = subprocess.run(_cmd(tempfile.mkdtemp(), *flags), capture_output=True, text=True,
                          env=_env(), timeout=SAFETY_NET, check=False)
    lines = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
    self.assertEqual(proc.returncode, 2, proc.stderr[-2000:])
    self.assertLen(lines, 1)
    self.assertNotIn("Traceback", proc.stderr)
    return lines[0]

  def test_unknown_key_and_bad_value(self):
    self.assertIn("unknown key foo", self._error("--config.train.foo=1"))
    # The override that names the unknown key is the one quoted, wherever it stands.
    self.assertIn("invalid config override --config.train.stepz=3 (unknown key stepz; did you "
                  "mean steps?)",
                  self._error("--config.data.name=files", "--config.train.stepz=3"))
    self.assertIn("Received train.steps=-1; expected a positive integer",
                  self._error("--config.train.steps=-1"))


@pytest.mark.slow
class KillTest(tf.test.TestCase):

  def test_sigkill_then_rerun_resumes(self):
    run_dir = tempfile.mkdtemp()
    cmd = _cmd(run_dir, "--config.train.steps=400", "--config.train.checkpoint_every=10",
               "--config.train.eval_every=400")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=_env())
    ckpt_dir = os.path.join(run_dir, "checkpoints")
    deadline = time.time() + SAFETY_NET
    while time.time() < deadline and not (tf.io.gfile.exists(ckpt_dir) and
                                          tf.train.latest_checkpoint(ckpt_dir) and
                                          tf.train.latest_checkpoint(ckpt_dir).endswith("-30")):
      time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)  # at an arbitrary moment after the third save
    proc.wait(timeout=30)
    killed_at = int(tf.train.latest_checkpoint(ckpt_dir).rsplit("-", 1)[1])
    self.assertGreaterEqual(killed_at, 30)
    rerun_cmd = cmd[:-3] + [f"--config.train.steps={killed_at + 10}",
                            "--config.train.checkpoint_every=10",
                            f"--config.train.eval_every={killed_at + 10}"]
    rerun = subprocess.run(rerun_cmd, capture_output=True, text=True, env=_env(),
                           timeout=SAFETY_NET, check=False)
    self.assertEqual(rerun.returncode, 0, rerun.stderr[-3000:])
    self.assertIn(f"Resumed from {ckpt_dir}/ckpt-{killed_at} at step {killed_at}",
                  rerun.stdout)
    summary = json.loads(rerun.stdout[rerun.stdout.index("{"):])
    self.assertEqual(summary["steps"], killed_at + 10)


def _summary(stdout):
  return json.loads(stdout[stdout.index("{"):])


def _best_score(run_dir):
  """best/'s recorded BLEU if the record names best/'s model, else None."""
  path = os.path.join(run_dir, "best", "score.json")
  latest = tf.train.latest_checkpoint(os.path.join(run_dir, "best"))
  if not os.path.exists(path) or latest is None:
    return None
  with open(path, encoding="utf-8") as f:
    record = json.load(f)
  return record["bleu"] if record["checkpoint"] == os.path.basename(latest) else None


@pytest.mark.slow
class FaultInjectionTest(tf.test.TestCase):
  """SIGKILL at chosen points (in a checkpoint save, in validation, between saving best/ and
  recording its score) and at random moments; every rerun resumes, best/ never gets worse, and
  the end equals an uninterrupted run."""

  FLAGS = ("--config.train.steps=60", "--config.train.checkpoint_every=10",
           "--config.train.eval_every=20", "--config.model.dropout=0.1")

  def test_kills_resume_exactly_and_never_worsen_best(self):
    """About a minute on 2 cores: seven training processes (a reference, five killed, the
    last resume), because SIGKILL and the resume after it only happen to a real process, and
    each kill point needs a run that reached it."""
    root = tempfile.mkdtemp()
    reference = subprocess.run(_cmd(os.path.join(root, "reference"), *self.FLAGS),
                               capture_output=True, text=True, env=_env(), timeout=SAFETY_NET,
                               check=False)
    self.assertEqual(reference.returncode, 0, reference.stderr[-3000:])
    expected = _summary(reference.stdout)

    run_dir = os.path.join(root, "killed")
    cmd = _cmd(run_dir, *self.FLAGS)
    checkpoints = os.path.join(run_dir, "checkpoints")
    best_before = None
    rng = random.Random(7)
    kills = [("best@20", None), ("save@30", None), ("validation@40", None),
             (None, rng.uniform(2.0, 8.0)), (None, rng.uniform(2.0, 8.0))]
    for point, delay in kills:
      env = _env(NMT_TF_KILL_AT=point) if point else _env()
      proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env)
      if delay is not None:  # a random moment after training has started
        deadline = time.time() + SAFETY_NET
        while time.time() < deadline and proc.poll() is None and not os.path.exists(
            os.path.join(run_dir, "train.lock")):
          time.sleep(0.05)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
      out, err = proc.communicate(timeout=SAFETY_NET)
      if proc.returncode == 0:
        break  # finished before the random moment came
      self.assertEqual(proc.returncode, -signal.SIGKILL, err[-3000:])
      self.assertNotIn("Traceback", err)
      if point == "save@30":  # what a kill while TensorFlow writes the files leaves
        os.makedirs(os.path.join(checkpoints, "ckpt-35_temp"))
      score = _best_score(run_dir)
      if best_before is not None:
        self.assertIsNotNone(score, f"best/ lost its score after the kill at {point or delay}")
        self.assertGreaterEqual(score, best_before)
      best_before = score if score is not None else best_before
    final = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=SAFETY_NET,
                           check=False)
    self.assertEqual(final.returncode, 0, final.stderr[-3000:])
    self.assertIn("Resumed from", final.stdout + out)
    self.assertFalse(os.path.exists(os.path.join(checkpoints, "ckpt-35_temp")))
    got = _summary(final.stdout)
    self.assertEqual(got["steps"], 60)
    self.assertAllClose(got["loss"], expected["loss"], rtol=1e-5)
    self.assertAllClose(got["last_validation"]["loss"], expected["last_validation"]["loss"],
                        rtol=1e-5)
    self.assertAllClose(got["best_bleu"], expected["best_bleu"])
    self.assertGreaterEqual(_best_score(run_dir), best_before or 0.0)
    self.assertAllClose(_best_score(run_dir), _best_score(os.path.join(root, "reference")))
    self.assertFalse(os.path.exists(os.path.join(run_dir, "train.lock")))
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
class RefusalExitCodeTest(tf.test.TestCase):

  def test_second_process_and_corrupt_state_exit_2_with_one_line(self):
    run_dir = tempfile.mkdtemp()
    os.makedirs(os.path.join(run_dir, "checkpoints"))
    with open(os.path.join(run_dir, "checkpoints", "checkpoint"), "w", encoding="utf-8") as f:
      f.write('model_checkpoint_path: "ckpt-30"\n')  # names a checkpoint that is gone
    for extra, message in (((), "every checkpoint is corrupt or partial"),
                           (("--restart_from_scratch", "--config.train.steps=2"), None)):
      proc = subprocess.run(_cmd(run_dir, *extra), capture_output=True, text=True, env=_env(),
                            timeout=SAFETY_NET, check=False)
      if message is None:
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        continue
      errors = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
      self.assertEqual(proc.returncode, 2, proc.stderr[-3000:])
      self.assertLen(errors, 1)
      self.assertIn(message, errors[0])
      self.assertNotIn("Traceback", proc.stderr)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
      with open(os.path.join(run_dir, "train.lock"), "w", encoding="utf-8") as f:
        json.dump({"pid": sleeper.pid, "host": socket.gethostname(), "started": "x"}, f)
      proc = subprocess.run(_cmd(run_dir), capture_output=True, text=True, env=_env(),
                            timeout=SAFETY_NET, check=False)
    finally:
      sleeper.kill()
      sleeper.wait()
    self.assertEqual(proc.returncode, 2, proc.stderr[-3000:])
    self.assertIn(f"error: {run_dir} is being trained by process {sleeper.pid}", proc.stderr)
    self.assertNotIn("Traceback", proc.stderr)


@pytest.mark.slow
class DistributedTest(tf.test.TestCase):

  def test_mirrored_on_two_logical_cpus(self):
    run_dir = tempfile.mkdtemp()
    proc = subprocess.run(
        _cmd(run_dir, "--train_logical_cpus=2", "--config.train.strategy=mirrored",
             "--config.train.steps=20", "--config.train.eval_every=20"),
        capture_output=True, text=True, env=_env(), timeout=SAFETY_NET, check=False)
    self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
    summary = json.loads(proc.stdout[proc.stdout.index("{"):])
    self.assertEqual(summary["steps"], 20)
    self.assertTrue(summary["checkpoint"].endswith("ckpt-20"))

  def test_two_workers(self):
    run_dir = tempfile.mkdtemp()
    out = self._workers(run_dir, "--config.train.steps=20", "--config.train.eval_every=20")
    summary = json.loads(out[out.index("{"):])
    self.assertEqual(summary["steps"], 20)
    self.assertTrue(tf.io.gfile.exists(os.path.join(run_dir, "checkpoints", "ckpt-20.index")))

  def _workers(self, run_dir, *flags):
    """Runs two workers of `run.py train`; returns the chief's stdout."""
    workers = [f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"]
    procs = []
    for index in range(2):
      tf_config = json.dumps({"cluster": {"worker": workers},
                              "task": {"type": "worker", "index": index}})
      procs.append(subprocess.Popen(
          _cmd(run_dir, "--config.train.strategy=multi_worker", *flags),
          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
          env=_env(TF_CONFIG=tf_config)))
    outputs = []
    try:
      for proc in procs:
        outputs.append(proc.communicate(timeout=SAFETY_NET))
    finally:
      for proc in procs:
        if proc.poll() is None:
          proc.kill()
    for proc, (_, err) in zip(procs, outputs):
      self.assertEqual(proc.returncode, 0, err[-3000:])
    return outputs[0][0]

  def test_two_workers_stream_their_parts_and_resume(self):
    root = tempfile.mkdtemp()
    paths = data.write_corpus(os.path.join(root, "corpus"), seed=1, train_size=600,
                              valid_size=8, test_size=4, max_length=8)
    files = ["--config.data.name=files", f"--config.data.train_src={paths['train'][0]}",
             f"--config.data.train_tgt={paths['train'][1]}",
             f"--config.data.valid_src={paths['valid'][0]}",
             f"--config.data.valid_tgt={paths['valid'][1]}",
             "--config.pipeline.shuffle_buffer=100", "--config.train.checkpoint_every=10"]
    run_dir = os.path.join(root, "run")
    self._workers(run_dir, *files, "--config.train.steps=20", "--config.train.eval_every=20")
    reader = tf.train.load_checkpoint(os.path.join(run_dir, "checkpoints", "ckpt-20"))
    saved = json.loads(reader.get_tensor("data_position/.ATTRIBUTES/VARIABLE_VALUE"))
    # By data (one file, two workers): pieces of 200 lines, 100 pairs each per worker.
    self.assertEqual((saved["workers"], saved["pieces"], saved["pairs_per_piece"]), (2, 3, 100))
    self.assertEqual([len(row) for row in saved["positions"]], [4, 4])  # one per worker
    out = self._workers(run_dir, *files, "--config.train.steps=30",
                        "--config.train.eval_every=30")
    self.assertIn("at step 20", out)
    self.assertEqual(json.loads(out[out.index("{"):])["steps"], 30)
