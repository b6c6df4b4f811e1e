"""The one interface of the training loops: how a model part runs its recurrences.

An encoder or decoder holds one TrainingLoops (`loops`), resolved from the model's
KernelOptions and precision where the model is built (Seq2Seq). Its layers state their
equations in `step`; while training, the part asks its TrainingLoops to run them over the
whole sequence:

  scan(step, inputs, state)         any step function, in one graph-mode loop (scan.py), the
                                    gradients of loop-invariant products deferred when the
                                    choice says so (deferred.py); also every pass outside
                                    training
  gru_stack(cells, inputs, h0s)     independent GRUCells (gru_sequence.py)
  cgru(cell, ...)                   the conditional GRU, optionally with the memory RNN's state
                                    memory (attention_sequence.py)
  rnnsearch(attention, C, gru, ...) Bahdanau et al.'s decoder (attention_sequence.py)
  luong(W_f, gru, W_c, ...)         Luong et al.'s input-feeding decoder (luong_sequence.py)

The last four run a hand-written backward pass with the same values and gradients as
iterating `step` (tests/test_models.py, tests/test_encoders.py); each returns None when the
choice takes autodiff for the part, and the part then runs `scan` over its `step`. The
weights they need are read from the layers here (weights.py), never packed by a layer.
"""

from nmt_tf.layers.kernels import weights
from nmt_tf.layers.kernels.attention_sequence import cgru_sequence, rnnsearch_sequence
from nmt_tf.layers.kernels.gru_sequence import gru_sequences
from nmt_tf.layers.kernels.luong_sequence import luong_sequence
from nmt_tf.layers.kernels.options import DEFAULT_CHOICE
from nmt_tf.layers.kernels.scan import scan_time


class TrainingLoops:
  """The training loops of one model part (module docstring).

  Args:
    choice: options.KernelChoice, resolved once for the part.
  """

  def __init__(self, choice=DEFAULT_CHOICE):
    self.choice = choice

  def scan(self, step, inputs, initial_state):
    """scan.scan_time(step, inputs, initial_state) with the choice's deferred gradients:
    (outputs [batch, time, ...], final state)."""
    return scan_time(step, inputs, initial_state, defer=self.choice.defer_gradients)

  def gru_stack(self, cells, inputs, initial_states, drops=None):
    """GRUCells of one reset placement over whole sequences, in one loop: per cell the states
    h_1 .. h_T [batch, time, units] from its inputs [batch, time, 3*units] (its
    `project_inputs` plus any other input terms) and h_0 [batch, units]; drops: per cell a
    recurrent dropout mask [batch, units], or None. None with autodiff."""
    if not self.choice.manual_backward:
      return None
    dtype = inputs[0].dtype
    return gru_sequences(inputs, initial_states,
                         [weights.gru_weights(cell, dtype) for cell in cells], drops)

  def cgru(self, cell, inputs, s0, memory, keys, mask, state_memory=None, drops=None):
    """A ConditionalGRUCell with soft additive attention over all target steps:
    (s_j, c_j, alpha_j) [batch, tgt_len, ...] from GRU1's input projections inputs
    [batch, tgt_len, 3*units]; with a StateMemory layer GRU1 reads its s~_j. None with
    autodiff."""
    if not self.choice.manual_backward:
      return None
    loop_weights = weights.cgru_weights(cell, memory.shape[-1], inputs.dtype, state_memory)
    return cgru_sequence(inputs, s0, memory, keys, mask, loop_weights,
                         self.choice.fused_attention, drops)[:3]

  def rnnsearch(self, attention, context_proj, gru, inputs, s0, memory, keys, mask):
    """The RNNsearch decoder with soft additive attention over all target steps: (s_j, c_j,
    alpha_j) [batch, tgt_len, ...] from the GRU's W E y + b inputs. None with autodiff."""
    if not self.choice.manual_backward:
      return None
    loop_weights = weights.rnnsearch_weights(attention, context_proj, gru, memory.shape[-1],
                                             inputs.dtype)
    return rnnsearch_sequence(inputs, s0, memory, keys, mask, loop_weights,
                              self.choice.fused_attention)

  def luong(self, feed_proj, gru, combine, inputs, s0, memory, keys, mask):
    """Luong et al.'s input-feeding GRU decoder with a soft dot or general score over all
    target steps: (h~_j, alpha_j) [batch, tgt_len, ...]. None with autodiff."""
    if not self.choice.manual_backward:
      return None
    loop_weights = weights.luong_weights(feed_proj, gru, combine, memory.shape[-1],
                                         inputs.dtype)
    return luong_sequence(inputs, s0, memory, keys, mask, loop_weights)


DEFAULT_LOOPS = TrainingLoops()
