"""BLEU against source-sentence length as a PNG (Bahdanau et al. 2015, Fig. 2)."""


import matplotlib

matplotlib.use("Agg")
from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position

from nmt_tf.evaluation.png import finish_png


def length_bleu_png(buckets, title=None, dpi=80):
  """Draws BLEU (y) per source-length bucket (x, the bucket's middle length).

  Args:
    buckets: list of analysis.LengthBucket (or (low, high, count, bleu) objects), or
      such lists as a dict {label: buckets} to compare systems (with a legend). The number
      of sentences is written at each point.
    title: optional title.

  Returns:
    PNG bytes.
  """
  series = buckets if isinstance(buckets, dict) else {"BLEU": buckets}
  fig, ax = plt.subplots(figsize=(5.0, 3.5), dpi=dpi)
  try:
    for label, values in series.items():
      xs = [(b.low + b.high) / 2 for b in values]
      ax.plot(xs, [b.bleu for b in values], marker="o", label=label)
      for b, x in zip(values, xs):
        ax.annotate(str(b.count), (x, b.bleu), fontsize=7, textcoords="offset points",
                    xytext=(0, 4), ha="center")
    ax.set_xlabel("source sentence length (words)")
    ax.set_ylabel("BLEU")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if isinstance(buckets, dict):
      ax.legend(fontsize=8)
    return finish_png(fig, ax, title)
  finally:
    plt.close(fig)
