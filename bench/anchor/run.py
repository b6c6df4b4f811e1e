"""Joey NMT 2.3.0 anchor: training target tokens/s and decoding sentences/s on Multi30k de-en.

Usage (with the anchor venv's python, after setup.sh and prepare.py):
  python bench/anchor/run.py [--anchor_dir DIR] [--steps 150] [--threads 2] [--limit 0]
      [--beams 1,5] [--sets test_2016,val] [--max_length ours|joey] [--lengths forced|model]
      [--skip_train]
Training: `python -m joeynmt train` (Joey's own loop) on config.yaml.in for --steps steps;
the figures are Joey's logged "Tokens per Sec" (target tokens incl. </s>, excl. <s> and
padding, over each --logging_freq steps of wall time) with the first --warmup share of the
steps dropped. Decoding: Joey's `prediction.predict` on the checkpoint just trained, batches
of 64 sentences in file order; the model is loaded and the first batch decoded (warm-up)
before the timed pass; the timed pass includes Joey's on-the-fly tokenization and
detokenization. The output length is capped per batch (Joey has one cap per batch), by
default at min(128, longest source of the batch) with </s> forbidden before the cap
(--lengths forced): a briefly trained model would stop after a few tokens.
Prints one JSON object on stdout; logs go to DIR/run.
"""

import argparse
import importlib.metadata
import json
import logging
import os
import pathlib
import re
import statistics
import string
import subprocess
import sys
import time

import torch
from joeynmt import prediction
from joeynmt.config import load_config, parse_global_args
from joeynmt.datasets import build_dataset

import common

HERE = os.path.dirname(os.path.abspath(__file__))
SETS = {"test_2016": "test_2016_flickr", "val": "val"}  # name -> file prefix
LOG_LINE = re.compile(r"Step:\s+(\d+),.*Tokens per Sec:\s+([\d.]+)")


def write_config(args, run_dir):
  """Fills config.yaml.in into run_dir/config.yaml; returns its path."""
  with open(os.path.join(HERE, "config.yaml.in"), encoding="utf-8") as f:
    text = string.Template(f.read()).substitute(
        data=os.path.join(args.anchor_dir, "data"), model_dir=os.path.join(run_dir, "model"),
        steps=args.steps, batch_tokens=args.batch_tokens, logging_freq=args.logging_freq)
  path = os.path.join(run_dir, "config.yaml")
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return path


def train(args, config, run_dir):
  """Runs Joey's training loop; returns the tokens/s summary of its log."""
  env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
  out_path = os.path.join(run_dir, "train.out")
  with open(out_path, "w", encoding="utf-8") as out:
    code = subprocess.run([sys.executable, "-m", "joeynmt", "train", config, "--skip-test"],
                          env=env, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
  if code:
    with open(out_path, encoding="utf-8") as f:
      sys.exit(f"joeynmt train failed ({code}):\n" + "".join(f.readlines()[-30:]))
  with open(os.path.join(run_dir, "model", "train.log"), encoding="utf-8") as f:
    logged = [(int(m[1]), float(m[2])) for m in LOG_LINE.finditer(f.read())]
  warmup = int(args.warmup * args.steps)
  kept = [rate for step, rate in logged if step > warmup]
  if not kept:
    sys.exit(f"no 'Tokens per Sec' line after step {warmup} in {run_dir}/model/train.log")
  stats = torch.load(os.path.join(run_dir, "model", "latest.ckpt"), map_location="cpu",
                     weights_only=False)["stats_state"]
  return {"target_tokens_per_s_median": round(statistics.median(kept), 1),
          "mean": round(statistics.mean(kept), 1), "steps": stats["steps"],
          "batch_tokens": args.batch_tokens,
          "mean_target_tokens_per_batch": round(stats["total_tokens"] / stats["steps"], 1),
          "warmup_steps_dropped": warmup, "intervals": len(kept),
          "logging_freq": args.logging_freq}


def capped_search(search, ratio, limit, forced):
  """Joey's search with max_output_length = min(limit, int(ratio * longest source of the
  batch, </s> included)); with `forced` also min_output_length = max_output_length (</s>
  forbidden before), so that every hypothesis runs to the cap as an untrained model's."""
  def wrapped(**kwargs):
    cap = min(limit, int(ratio * int(kwargs["batch"].src_length.max())))
    kwargs["max_output_length"] = cap
    if forced:
      kwargs["min_output_length"] = cap  # predict() itself never passes the option on
    return search(**kwargs)
  return wrapped


def write_sources(args, run_dir, prefix, count, name=None):
  """Writes the first `count` German sentences of a set alone (no reference: no scoring)
  to run_dir/decode/<name or prefix>.de; returns the path without the language suffix."""
  os.makedirs(os.path.join(run_dir, "decode"), exist_ok=True)
  with open(os.path.join(args.anchor_dir, "data", f"{prefix}.de"), encoding="utf-8") as f:
    lines = f.read().splitlines()[:count or None]
  path = os.path.join(run_dir, "decode", name or prefix)
  with open(path + ".de", "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  return path


def decode(args, config, run_dir):
  """{beam name: {set name: figures}} of Joey's predict on the trained checkpoint."""
  torch.set_num_threads(args.threads)
  if not args.verbose:  # quiet Joey's logs and progress bars
    for name in logging.root.manager.loggerDict:
      if name.startswith("joeynmt"):
        logging.getLogger(name).setLevel(logging.WARNING)
    tqdm = prediction.tqdm
    prediction.tqdm = lambda *a, **kw: tqdm(*a, **{**kw, "disable": True})
  cfg = load_config(pathlib.Path(config))
  cfg["data"].pop("dev")
  cfg["data"]["test"] = write_sources(args, run_dir, "test_2016_flickr", args.batch_size,
                                      "warmup")
  joey = parse_global_args(cfg, rank=0, mode="test")
  model, _, _, warmup_data = prediction.prepare(joey, rank=0, mode="test")
  ratio, limit = (1.0, 128) if args.max_length == "ours" else (1.5, sys.maxsize)
  prediction.search = capped_search(prediction.search, ratio, limit, args.lengths == "forced")

  def run(data, beam):
    test_args = joey.test._replace(beam_size=beam, batch_size=args.batch_size,
                                   batch_type="sentence")
    start = time.perf_counter()
    out = prediction.predict(model=model, data=data, device=joey.device, n_gpu=0,
                             args=test_args, autocast=joey.autocast)
    return time.perf_counter() - start, out[3]  # seconds, token lists (</s> included)

  report = {}
  for beam in args.beams:
    name = "greedy" if beam == 1 else f"beam{beam}"
    run(warmup_data, beam)
    for set_name in args.sets:
      path = write_sources(args, run_dir, SETS[set_name], args.limit)
      data = build_dataset(dataset_type="plain", path=path, src_lang="de", trg_lang="en",
                           split="test", tokenizer=warmup_data.tokenizer,
                           sequence_encoder=warmup_data.sequence_encoder,
                           has_prompt=warmup_data.has_prompt)
      seconds, hyps = run(data, beam)
      entry = {"sentences_per_s": round(len(hyps) / seconds, 2), "sentences": len(hyps),
               "seconds": round(seconds, 1),
               "output_tokens_per_sentence": round(sum(map(len, hyps)) / len(hyps), 1)}
      # The first set is the anchor's figure; the others are nested by name.
      if set_name == args.sets[0]:
        report[name] = {"set": set_name, **entry}
      else:
        report[name][set_name] = entry
  return report


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  common.add_dir_arguments(parser)
  parser.add_argument("--steps", type=int, default=150, help="Training steps.")
  parser.add_argument("--warmup", type=float, default=0.3,
                      help="Share of the steps whose tokens/s are dropped.")
  parser.add_argument("--logging_freq", type=int, default=10)
  parser.add_argument("--batch_tokens", type=int, default=2000)
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--batch_size", type=int, default=64, help="Sentences per search.")
  parser.add_argument("--beams", type=lambda s: [int(b) for b in s.split(",")],
                      default=[1, 5], help="Beam sizes to time (1 = greedy).")
  parser.add_argument("--sets", type=lambda s: s.split(","), default=list(SETS),
                      help="Sets to decode: test_2016 (the anchor's), val (bench_decode's).")
  parser.add_argument("--limit", type=int, default=0,
                      help="Decode only the first N sentences of each set (0 = all).")
  parser.add_argument("--max_length", choices=["ours", "joey"], default="ours",
                      help="ours: min(128, longest source of the batch incl. </s>); joey: "
                      "Joey's default 1.5 x longest source of the batch.")
  parser.add_argument("--lengths", choices=["forced", "model"], default="forced",
                      help="forced: </s> forbidden before the cap, so every sentence of a "
                      "batch decodes max_output_length steps (as our untrained bench_decode "
                      "model); model: the trained checkpoint's own </s>.")
  parser.add_argument("--skip_train", action="store_true",
                      help="Decode the checkpoint of the previous run only.")
  parser.add_argument("--verbose", action="store_true", help="Keep Joey's decoding logs.")
  args = parser.parse_args()
  if not set(args.sets) <= set(SETS):
    parser.error(f"--sets: expected some of {list(SETS)}")
  run_dir = os.path.join(args.anchor_dir, "run")
  os.makedirs(run_dir, exist_ok=True)
  config = write_config(args, run_dir)
  report = {"tool": f"joeynmt {importlib.metadata.version('joeynmt')}", "torch": torch.__version__, "threads": args.threads}
  if not args.skip_train:
    report["train"] = train(args, config, run_dir)
  report.update(decode(args, config, run_dir))
  report["max_output_length"] = ("min(128, longest source of the batch incl. </s>)"
                                 if args.max_length == "ours"
                                 else "int(1.5 x longest source of the batch incl. </s>)")
  report["lengths"] = ("forced: every hypothesis runs to max_output_length"
                       if args.lengths == "forced" else "model: the checkpoint's own </s>")
  report["machine"] = common.machine()
  print(json.dumps(report, indent=2))


if __name__ == "__main__":
  main()
