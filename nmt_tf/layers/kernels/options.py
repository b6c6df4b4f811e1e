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

FUSED_ATTENTION = ("auto", "xla", "off")
COMPILED_CELL = ("auto", "off")


@dataclasses.dataclass(frozen=True)
class KernelOptions:
  """The options of the speed kernels (frozen: one value per traced function).

  Attributes:
    defer_gradients: whether scan_time loops take the gradients of loop-invariant operands
      after the loop (deferred.py): None = loops with bfloat16 inputs only, True, False.
    fused_attention: the additive score while training (fused.py, `resolve`): "auto" = the
      XLA kernels with bfloat16 products of float32 keys, plain ops otherwise; "xla" = the XLA
      kernels whatever the precision; "off" = plain ops.
    compiled_cell: the GRU steps' elementwise work while training (cells.py): "auto" = the
      compiled cell (gru_cell.cc) for float32 activations where its library loads; "off" =
      plain ops.
  """

  defer_gradients: bool | None = None
  fused_attention: str = "auto"
  compiled_cell: str = "auto"

  def __post_init__(self):
    if not (self.defer_gradients is None or isinstance(self.defer_gradients, bool)):
      raise ValueError(f"Received defer_gradients={self.defer_gradients!r}; expected None, "
                       "True or False.")
    if self.fused_attention not in FUSED_ATTENTION:
      raise ValueError(f"Received fused_attention={self.fused_attention!r}; expected one of "
                       f"{FUSED_ATTENTION}.")
    if self.compiled_cell not in COMPILED_CELL:
      raise ValueError(f"Received compiled_cell={self.compiled_cell!r}; expected one of "
                       f"{COMPILED_CELL}.")

  def resolve(self, matmul_dtype=None, compute_dtype="float32"):
    """The KernelChoice for a model whose products take `matmul_dtype` operands (None = the
    compute dtype) and whose activations are `compute_dtype`.

    defer_gradients None -> whether the loops' inputs are bfloat16 (measured: +8% there, -5%
    with float32 inputs, scan.py); fused_attention "auto" -> the XLA kernels with
    bfloat16 products of float32 keys (the float32_bf16_matmul precision), plain ops
    otherwise (measured: +5-6% there, -5-11% in float32, fused.py); compiled_cell "auto" ->
    on for float32 activations (the cell is float32 only).
    """
    compute = tf.as_dtype(compute_dtype)
    product = compute if matmul_dtype in (None, "float32") else tf.as_dtype(matmul_dtype)
    defer = compute == tf.bfloat16 if self.defer_gradients is None else self.defer_gradients
    if self.fused_attention == "auto":
      fused = "xla" if compute == tf.float32 and product == tf.bfloat16 else False
    else:
      fused = "xla" if self.fused_attention == "xla" else False
    return KernelChoice(defer_gradients=defer, fused_attention=fused,
                        compiled_cell=self.compiled_cell == "auto" and compute == tf.float32)


@dataclasses.dataclass(frozen=True)
class KernelChoice:
  """The kernels a model trains with, resolved from KernelOptions once.

  Attributes:
    defer_gradients: the scan_time loops take the gradients of loop-invariant operands after
      the loop (deferred.py).
    fused_attention: the additive scores while training: "xla" (fused.py) or False (plain
      ops). Decoding and export always take the plain ops.
    compiled_cell: the GRU steps of a training pass take the compiled cell where its library
      loads (cells.py). Decoding and export always take the plain ops.
  """

  defer_gradients: bool = False
  fused_attention: str | bool = False
  compiled_cell: bool = True


DEFAULT_OPTIONS = KernelOptions()
DEFAULT_CHOICE = DEFAULT_OPTIONS.resolve()
