"""Where each word of a caption looked: the attention over the image cells as heat maps on
the image (Xu et al. 2015, fig. 2-3), as PNG bytes for TensorBoard and `nmt-tf caption`.

One panel per generated word: the image, darkened where the word's attention is low; the
attention alpha_t [h * w] over the annotation grid is upsampled smoothly (bilinear) to the
image's size.
"""

import io

from matplotlib.figure import Figure
import numpy as np

COLUMNS = 6  # panels per row


def _upsample(weights, height, width):
  """Bilinear upsampling of weights [h, w] to [height, width] (cell centres aligned)."""
  h, w = weights.shape
  ys = np.clip((np.arange(height) + 0.5) * h / height - 0.5, 0, h - 1)
  xs = np.clip((np.arange(width) + 0.5) * w / width - 0.5, 0, w - 1)
  y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
  y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
  fy, fx = (ys - y0)[:, None], (xs - x0)[None, :]
  top = weights[y0][:, x0] * (1 - fx) + weights[y0][:, x1] * fx
  bottom = weights[y1][:, x0] * (1 - fx) + weights[y1][:, x1] * fx
  return top * (1 - fy) + bottom * fy  # [height, width]


def overlay(image, weights):
  """image [H, W, 3] in [0, 1], weights [h, w] -> [H, W, 3]: the image shaded by the
  attention, scaled so that the most attended cell shows the image unshaded."""
  heat = _upsample(np.asarray(weights, np.float64), image.shape[0], image.shape[1])
  heat = heat / max(float(heat.max()), 1e-9)
  return image * (0.15 + 0.85 * heat[..., None])


def image_attention_png(image, attention, grid, words, title=None, dpi=80):
  """Draws the attention of each word over the image.

  Args:
    image: [H, W, 3] float in [0, 1] (or uint8).
    attention: [num_words, h * w] weights, cells row by row; rows beyond `words` are cut.
    grid: (h, w) of the annotation grid.
    words: the generated tokens (str or bytes), EOS included if shown.
    title: optional figure title.
    dpi: resolution.

  Returns:
    The PNG image as bytes.
  """
  image = np.asarray(image, np.float64)
  if image.max() > 1.0:
    image = image / 255.0
  words = [w.decode("utf-8", "replace") if isinstance(w, bytes) else str(w) for w in words]
  attention = np.asarray(attention, np.float64)[:len(words)]
  panels = len(words) + 1
  columns = min(COLUMNS, panels)
  rows = -(-panels // columns)
  fig = Figure(figsize=(1.6 * columns, 1.75 * rows + (0.3 if title else 0.0)), dpi=dpi)
  for index in range(rows * columns):
    ax = fig.add_subplot(rows, columns, index + 1)
    ax.set_axis_off()
    if index == 0:
      ax.imshow(image, interpolation="nearest")
      ax.set_title("image", fontsize=8)
    elif index < panels:
      weights = attention[index - 1].reshape(grid)
      ax.imshow(overlay(image, weights), interpolation="nearest")
      ax.set_title(words[index - 1], fontsize=8)
  if title:
    fig.suptitle(title, fontsize=8)
  buffer = io.BytesIO()
  fig.savefig(buffer, format="png")
  return buffer.getvalue()


def caption_attention_png(captioner, image, out, row, title):
  """image_attention_png of the best caption of row `row` of `out`, the output of an
  inference.image_captioner.Captioner's `caption` for `image` [H, W, 3]."""
  length = int(out["lengths"][row, 0])
  return image_attention_png(image, out["attention"][row, 0, :length].numpy(), captioner.grid,
                             captioner.words(out["ids"][row, 0, :length].numpy()),
                             title=title)
