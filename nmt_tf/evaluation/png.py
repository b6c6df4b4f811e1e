"""Finishing a matplotlib figure as PNG bytes (shared by the evaluation plots)."""

import io


def finish_png(fig, ax, title=None, tight_layout=True):
  """Sets the optional title, lays the figure out and returns it as PNG bytes. The saved image
  is cropped to what is drawn (a legend or note outside the axes included); a figure laid out
  by its caller passes tight_layout=False."""
  if title:
    ax.set_title(title, fontsize=9)
  if tight_layout:
    fig.tight_layout()
  buffer = io.BytesIO()
  fig.savefig(buffer, format="png", bbox_inches="tight", pad_inches=0.1)
  return buffer.getvalue()
