"""BLEU against source-sentence length as a PNG (Bahdanau et al. 2015, Fig. 2)."""


import matplotlib

matplotlib.use("Agg")
from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position

from nmt_tf.evaluation.png import finish_png

# Buckets of fewer sentences are not drawn: the BLEU of one or two sentences says nothing of
# the model at that length (Multi30k's test set has one sentence of 30 words or more).
MIN_SENTENCES = 10


def plotted(buckets, min_sentences=MIN_SENTENCES):
  """(buckets drawn, buckets left out): those of at least / fewer than min_sentences."""
  return ([b for b in buckets if b.count >= min_sentences],
          [b for b in buckets if b.count < min_sentences])


def length_bleu_png(buckets, title=None, dpi=80, min_sentences=MIN_SENTENCES):
  """Draws BLEU (y) per source-length bucket (x, the bucket's middle length).

  Args:
    buckets: list of analysis.LengthBucket (or (low, high, count, bleu) objects), or
      such lists as a dict {label: buckets} to compare systems (with a legend). The number
      of sentences is written at each point.
    title: optional title.
    dpi: resolution.
    min_sentences: buckets of fewer sentences are left out (named in a note on the plot).

  Returns:
    PNG bytes.
  """
  series = buckets if isinstance(buckets, dict) else {"BLEU": buckets}
  fig, ax = plt.subplots(figsize=(5.0, 3.5), dpi=dpi)
  try:
    left_out = set()
    for label, values in series.items():
      values, dropped = plotted(values, min_sentences)
      left_out.update((b.low, b.high, b.count) for b in dropped)
      xs = [(b.low + b.high) / 2 for b in values]
      ax.plot(xs, [b.bleu for b in values], marker="o", label=label)
      for b, x in zip(values, xs):
        ax.annotate(str(b.count), (x, b.bleu), fontsize=7, textcoords="offset points",
                    xytext=(0, 4), ha="center")
    if left_out:
      ax.text(0.01, 0.01, f"not drawn (< {min_sentences} sentences): " + ", ".join(
          f"{low}-{high} words ({count})" for low, high, count in sorted(left_out)),
              transform=ax.transAxes, fontsize=7, va="bottom")
    ax.set_xlabel("source sentence length (words)")
    ax.set_ylabel("BLEU")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if isinstance(buckets, dict):
      ax.legend(fontsize=8)
    return finish_png(fig, ax, title)
  finally:
    plt.close(fig)
