"""How the speed kernels run: the options a user sets, and the choice they resolve to.

No option changes what is computed, only how (the values agree up to float rounding); the
defaults are the fastest paths measured on CPU (docs/PERFORMANCE.md). Benchmarks and tests set
the others to compare the paths. Seq2Seq holds one KernelOptions (`kernel_options`) and,
where it is built (or when they are set), resolves them with its precision into one
KernelChoice per part (`KernelOptions.resolve`), which the part's TrainingLoops keep
(loops.py); the forward pass's scope carries the score kernel (precision.py): no layer
decides anything.
"""

import dataclasses

import tensorflow as tf

PARTS = ("encoder", "decoder")
# gru_backward -> the parts that train through TensorFlow's gradient of scan_time.
AUTODIFF_PARTS = {
    "manual": frozenset(),
    "autodiff": frozenset(PARTS),
    "autodiff_encoder": frozenset({"encoder"}),
    "autodiff_decoder": frozenset({"decoder"}),
}
FUSED_ATTENTION = ("auto", "xla", "off")


@dataclasses.dataclass(frozen=True)
class KernelOptions:
  """The options of the speed kernels (frozen: one value per traced function).

  Attributes:
    gru_backward: the backward pass of the recurrences while training. "manual": the loops with
      a hand-written backward pass (gru_sequence.py for the GRU encoders and the encdec
      decoder, attention_sequence.py and luong_sequence.py for the attention decoders they
      cover); "autodiff": TensorFlow's gradient of the scan_time loops for both;
      "autodiff_encoder", "autodiff_decoder": autodiff for that part only.
    defer_gradients: whether scan_time loops take the gradients of loop-invariant operands
      after the loop (deferred.py): None = loops with bfloat16 inputs only, True, False.
    fused_attention: the additive score while training (fused.py, `resolve`): "auto" = the
      XLA kernels with bfloat16 products of float32 keys, plain ops otherwise; "xla" = the XLA
      kernels whatever the precision; "off" = plain ops.
  """

  gru_backward: str = "manual"
  defer_gradients: bool | None = None
  fused_attention: str = "auto"

  def __post_init__(self):
    if self.gru_backward not in AUTODIFF_PARTS:
      raise ValueError(f"Received gru_backward={self.gru_backward!r}; expected one of "
                       f"{tuple(AUTODIFF_PARTS)}.")
    if not (self.defer_gradients is None or isinstance(self.defer_gradients, bool)):
      raise ValueError(f"Received defer_gradients={self.defer_gradients!r}; expected None, "
                       "True or False.")
    if self.fused_attention not in FUSED_ATTENTION:
      raise ValueError(f"Received fused_attention={self.fused_attention!r}; expected one of "
                       f"{FUSED_ATTENTION}.")

  def manual_backward(self, part):
    """Whether `part` ("encoder" or "decoder") trains with the hand-written backward pass."""
    if part not in PARTS:
      raise ValueError(f"Received part={part!r}; expected one of {PARTS}.")
    return part not in AUTODIFF_PARTS[self.gru_backward]

  def resolve(self, part, matmul_dtype=None, compute_dtype="float32"):
    """The KernelChoice of `part` ("encoder" or "decoder") for a model whose products take
    `matmul_dtype` operands (None = the compute dtype) and whose activations are
    `compute_dtype`.

    defer_gradients None -> whether the loops' inputs are bfloat16 (measured: +8% there, -5%
    with float32 inputs, scan.py); fused_attention "auto" -> the XLA kernels with
    bfloat16 products of float32 keys (the float32_bf16_matmul precision), plain ops
    otherwise (measured: +5-6% there, -5-11% in float32, fused.py).
    """
    compute = tf.as_dtype(compute_dtype)
    product = compute if matmul_dtype in (None, "float32") else tf.as_dtype(matmul_dtype)
    defer = compute == tf.bfloat16 if self.defer_gradients is None else self.defer_gradients
    if self.fused_attention == "auto":
      fused = "xla" if compute == tf.float32 and product == tf.bfloat16 else False
    else:
      fused = "xla" if self.fused_attention == "xla" else False
    return KernelChoice(manual_backward=self.manual_backward(part), defer_gradients=defer,
                        fused_attention=fused)


@dataclasses.dataclass(frozen=True)
class KernelChoice:
  """The kernels one part of a model trains with, resolved from KernelOptions once.

  Attributes:
    manual_backward: the recurrences train through the loops with a hand-written backward
      pass (gru_sequence.py, attention_sequence.py, luong_sequence.py) where the layer has one.
    defer_gradients: the scan_time loops take the gradients of loop-invariant operands after
      the loop (deferred.py).
    fused_attention: the additive scores while training: "xla" (fused.py) or False (plain
      ops). Decoding and export always take the plain ops.
  """

  manual_backward: bool = True
  defer_gradients: bool = False
  fused_attention: str | bool = False


DEFAULT_OPTIONS = KernelOptions()
DEFAULT_CHOICE = DEFAULT_OPTIONS.resolve("decoder")
