"""The TensorBoard scalars of a run as text: one line per tag, `step:value` at each step logged
(or at the steps asked), from every events file under RUN/tensorboard. The later file wins
where a resumed run logged a step twice. For hard attention, the `reinforce/` tags are the
diagnostics of docs/MODELS.md ("Hard attention on Multi30k").

  python bench/run_scalars.py --run_dir RUN [--tags reinforce/,train/grad_norm,valid/bleu]
      [--steps 1000,1500]
"""

import argparse
import collections
import glob
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# pylint: disable=wrong-import-position
import tensorflow as tf


def scalar_events(run_dir):
  """(tag, step, wall time, value) of every scalar summary under run_dir/tensorboard, file by
  file in the order the run wrote them (of their last writes), so that where a resumed run
  logged a step twice the later value comes last. Text and images are left out."""
  files = sorted(glob.glob(os.path.join(run_dir, "tensorboard", "**", "events.out.tfevents.*"),
                           recursive=True), key=os.path.getmtime)
  if not files:
    raise FileNotFoundError(f"no TensorBoard events under {run_dir}/tensorboard; pass the "
                            "--run_dir of a run that has trained.")
  for path in files:
    for event in _events(path):
      for value in event.summary.value:
        if value.HasField("simple_value"):
          yield value.tag, event.step, event.wall_time, float(value.simple_value)
        elif value.HasField("tensor") and not value.tensor.tensor_shape.dim:
          tensor = tf.make_ndarray(value.tensor)
          if tensor.dtype.kind == "f":
            yield value.tag, event.step, event.wall_time, float(tensor)


def read_scalars(run_dir):
  """{tag: {step: value}} of the scalar summaries under run_dir/tensorboard (scalar_events),
  a later value of a step replacing an earlier one."""
  values = collections.defaultdict(dict)
  for tag, step, _, value in scalar_events(run_dir):
    values[tag][step] = value
  return dict(values)


def _events(path):
  """The events of one file, up to a record cut short (a run stopped while writing), as
  TensorBoard reads them."""
  try:
    for record in tf.data.TFRecordDataset(path):
      yield tf.compat.v1.Event.FromString(record.numpy())
  except tf.errors.DataLossError:
    return


def format_lines(values, tags=None, steps=None):
  """The lines printed: `tag step:value ...` for each tag starting with one of `tags` (all when
  None), at `steps` (all when None), values to 4 significant digits."""
  lines = []
  for tag in sorted(values):
    if tags and not tag.startswith(tuple(tags)):
      continue
    points = sorted(values[tag].items())
    if steps:
      points = [(step, value) for step, value in points if step in steps]
    if points:
      lines.append(tag + " " + " ".join(f"{step}:{value:.4g}" for step, value in points))
  return lines


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
  parser.add_argument("--run_dir", required=True)
  parser.add_argument("--tags", default="", help="comma-separated tag prefixes (default all)")
  parser.add_argument("--steps", default="", help="comma-separated steps (default all)")
  args = parser.parse_args(argv)
  try:
    steps = {int(s) for s in args.steps.split(",") if s.strip()}
  except ValueError:
    print(f"error: --steps={args.steps!r}: expected integers separated by commas.",
          file=sys.stderr)
    return 2
  try:
    values = read_scalars(args.run_dir)
  except FileNotFoundError as error:
    print(f"error: {error}", file=sys.stderr)
    return 2
  tags = [t.strip() for t in args.tags.split(",") if t.strip()]
  for line in format_lines(values, tags, steps):
    print(line)
  return 0


if __name__ == "__main__":
  sys.exit(main())
