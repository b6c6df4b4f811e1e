"""How the speed kernels run: the options a user sets, and the choice they resolve to.

No option changes what is computed, only how (the values agree up to float rounding); the
defaults are the fastest paths measured on CPU (docs/PERFORMANCE.md). Benchmarks and tests set
the others to compare the paths. Seq2Seq holds one KernelOptions (`kernel_options`) and,
where it is built (or when they are set), resolves them with its precision into one
KernelChoice (`KernelOptions.resolve`), which the parts' TrainingLoops keep (loops.py); the
forward pass's scope carries the score kernel and the compiled cell (precision.py): no layer
decides anything.
"""

import dataclasses

import tensorflow as tf

COMPILED_CELL = ("auto", "off")


@dataclasses.dataclass(frozen=True)
class KernelOptions:
  """The options of the speed kernels (frozen: one value per traced function).

  Attributes:
    defer_gradients: whether scan_time loops take the gradients of loop-invariant operands
      after the loop (deferred.py): None = loops with bfloat16 inputs only, True, False.
    compiled_cell: the elementwise work of the recurrent steps while training, the GRU gates
      and the additive attention scores (cells.py): "auto" = the compiled cell (gru_cell.cc)
      for float32 activations where its library loads; "off" = plain ops.
  """

  defer_gradients: bool | None = None
  compiled_cell: str = "auto"

  def __post_init__(self):
    if not (self.defer_gradients is None or isinstance(self.defer_gradients, bool)):
      raise ValueError(f"Received defer_gradients={self.defer_gradients!r}; expected None, "
                       "True or False.")
    if self.compiled_cell not in COMPILED_CELL:
      raise ValueError(f"Received compiled_cell={self.compiled_cell!r}; expected one of "
                       f"{COMPILED_CELL}.")

  def resolve(self, matmul_dtype=None, compute_dtype="float32"):
    """The KernelChoice for a model whose products take `matmul_dtype` operands (None = the
    compute dtype) and whose activations are `compute_dtype`.

    defer_gradients None -> whether the loops' inputs are bfloat16 (docs/PERFORMANCE.md,
    "Design choices, measured": loop-invariant weight gradients after the loop);
    compiled_cell "auto" -> on for float32 activations (the cell is float32 only).
    """
    del matmul_dtype  # the products' precision chooses no kernel
    compute = tf.as_dtype(compute_dtype)
    defer = compute == tf.bfloat16 if self.defer_gradients is None else self.defer_gradients
    return KernelChoice(defer_gradients=defer,
                        compiled_cell=self.compiled_cell == "auto" and compute == tf.float32)


@dataclasses.dataclass(frozen=True)
class KernelChoice:
  """The kernels a model trains with, resolved from KernelOptions once.

  Attributes:
    defer_gradients: the scan_time loops take the gradients of loop-invariant operands after
      the loop (deferred.py).
    compiled_cell: the recurrent steps of a training pass take the compiled cell where its
      library loads (cells.py). Decoding and export always take the plain ops.
  """

  defer_gradients: bool = False
  compiled_cell: bool = True


DEFAULT_OPTIONS = KernelOptions()
DEFAULT_CHOICE = DEFAULT_OPTIONS.resolve()
