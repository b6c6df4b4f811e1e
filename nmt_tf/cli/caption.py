"""`nmt-tf caption`: captions for images with a captioning run (model.encoder="image").

  nmt-tf caption --run_dir=runs/shapes --input_file=image.png
  nmt-tf caption --run_dir=runs/shapes --input_file=photos/ --beam_size=5 --attention_dir=maps

--input_file is an image (JPEG, PNG, GIF or BMP), a folder (its images, sorted by name) or
'-' (stdin: one image path per line). Output, one line per image:
  plain                   image<TAB>caption
  --nbest=N (N > 1)       image<TAB>rank<TAB>caption<TAB>score   (N lines per image)
--attention_dir writes <image name>.attention.png for each: the attention of every word over
the image (Xu et al. 2015, fig. 2). A missing file or one that is not an image, or a
destination that cannot be written (nmt_tf/write_path.py), is an `error:` line naming it,
exit code 2, and nothing is captioned.
"""

import os
import sys

from absl import flags
import numpy as np
import tensorflow as tf

from nmt_tf import write_path
from nmt_tf.cli import common
from nmt_tf.cli import translate  # pylint: disable=unused-import  (--input_file, --output_file)
from nmt_tf.data import captions
from nmt_tf.data.errors import DataError
from nmt_tf.evaluation.image_attention import caption_attention_png
from nmt_tf.experiment.run_dir import RunDirError
from nmt_tf.inference import load_models
from nmt_tf.inference.image_captioner import Captioner

COMMAND = "caption"
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".bmp")

flags.DEFINE_string("attention_dir", None, "caption: write each image's attention heat maps "
                    "(<image name>.attention.png) to this directory.")

FLAGS = flags.FLAGS


def image_paths(value):
  """The image files that --input_file names (see the module docstring)."""
  if value == "-":
    paths = [line.strip() for line in sys.stdin if line.strip()]
    if not paths:
      raise DataError("Standard input names no image; give one image path per line, or "
                      "--input_file=IMAGE_OR_FOLDER.")
  elif os.path.isdir(value):
    paths = sorted(os.path.join(value, name) for name in os.listdir(value)
                   if name.lower().endswith(IMAGE_EXTENSIONS))
    if not paths:
      raise DataError(f"The folder {value} holds no image ({', '.join(IMAGE_EXTENSIONS)}); "
                      "give a folder of images or an image file.")
  else:
    paths = [value]
  for path in paths:
    if not os.path.isfile(path):
      raise DataError(f"The image {path} does not exist; check --input_file.")
  return paths


def read_images(paths, size):
  """float32 [n, size, size, 3] of the files; DataError naming the first that is no image."""
  images = []
  for path in paths:
    with open(path, "rb") as f:
      images.append(captions.read_image(f.read(), size, path))
  return np.stack(images)


def load_captioner():
  """(Captioner, decode config) of --run_dir; RunDirError for a translation run."""
  model, config, _, tokenizer, _ = load_models(FLAGS.run_dir, FLAGS.checkpoint,
                                               FLAGS.checkpoints, FLAGS.hard_inference)
  if config.model.encoder != "image":
    raise RunDirError(f"{FLAGS.run_dir} is a translation run (model.encoder="
                      f"{config.model.encoder!r}); caption with a captioning run, or use "
                      "`nmt-tf translate`.")
  decode = common.decode_config(config)
  return Captioner(model, tokenizer, decode), decode


def write_attention(captioner, path, image, out, row, directory):
  """<directory>/<image name>.attention.png of row `row` of a caption output."""
  png = caption_attention_png(captioner, image, out, row, os.path.basename(path))
  write_path.make_folder(directory, "--attention_dir")
  write_path.write_bytes(os.path.join(directory, os.path.basename(path) + ".attention.png"),
                         png)


def caption_lines(captioner, decode, paths, images):
  """Yields the output lines (see the module docstring), batch by batch, writing the
  attention maps of each image as its lines are produced."""
  spec = tf.TensorSpec([None, captioner.image_size, captioner.image_size, 3], tf.float32)
  search = tf.function(lambda x: captioner.caption(x), input_signature=[spec],
                       autograph=False)
  for start in range(0, len(paths), decode.batch_size):
    chunk = images[start:start + decode.batch_size]
    out = search(tf.constant(chunk))
    texts = out["caption"].numpy()
    for row, path in enumerate(paths[start:start + len(chunk)]):
      if decode.nbest > 1:
        for rank in range(texts.shape[1]):
          yield (f"{path}\t{rank}\t{texts[row, rank].decode('utf-8')}\t"
                 f"{float(out['scores'][row, rank]):.4f}")
      else:
        yield f"{path}\t{texts[row, 0].decode('utf-8')}"
      if FLAGS.attention_dir:
        write_attention(captioner, path, chunk[row], out, row, FLAGS.attention_dir)


@common.decoding_command
def run(argv):
  if argv:
    print(f"error: caption takes no positional arguments; received {argv}. Use "
          "--input_file.", file=sys.stderr)
    return 2
  try:
    paths = image_paths(FLAGS.input_file)
    if FLAGS.output_file != "-":
      write_path.check_output(FLAGS.output_file, inputs=paths)
    if FLAGS.attention_dir:
      write_path.check_folder(FLAGS.attention_dir, "--attention_dir", inputs=paths)
    captioner, decode = load_captioner()
    images = read_images(paths, captioner.image_size)
    return common.write_lines(FLAGS.output_file, caption_lines(captioner, decode, paths,
                                                               images), "caption")
  except common.USER_ERRORS as error:
    print(f"error: {error}", file=sys.stderr)
    return 2
