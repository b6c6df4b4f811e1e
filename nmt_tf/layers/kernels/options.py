"""How the speed kernels run: the options a forward pass hands down to its layers.

No option changes what is computed, only how (the values agree up to float rounding); the
defaults are the fastest paths measured on CPU (docs/PERFORMANCE.md). Benchmarks and tests set
the others to compare the paths. Seq2Seq holds one KernelOptions (`kernel_options`) and passes
it to its encoder and decoder at every call, which pass it on to their cells and attention.
"""

import dataclasses

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
    fused_attention: the additive score while training (fused.py `use_fused`): "auto" = the
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


DEFAULT_OPTIONS = KernelOptions()
