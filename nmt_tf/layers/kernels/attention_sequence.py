"""Attention-conditioned GRU decoders over a whole target sequence with a hand-written backward
pass (BPTT), as gru_sequence.py does for the plain GRU: the conditional GRU of
dl4mt/Nematus (`cgru_sequence`) and the RNNsearch decoder of Bahdanau et al. 2015
(`rnnsearch_sequence`); Luong et al. 2015's input-feeding decoder is in luong_sequence.py.

Forward, per target step j (x_j = W E y_{j-1} + b precomputed; k_i = U_a h_i + b_a keys):
  cgru (docs/EQUATIONS.md "cgru"):   s'_j = GRU1(x_j, s_{j-1})           (reset-after)
  rnnsearch ("rnnsearch"):           s'_j = s_{j-1}
  q_j = W_q s'_j,   e_ji = v^T tanh(k_i + q_j),   alpha_j = softmax over real positions of e_j,
  c_j = sum_i alpha_ji h_i
  cgru:       s_j = GRU2(W2 c_j + b2, s'_j)                (reset-after)
              and with a deep transition s_j <- GRU_k(b_k, s_j) for k = 3..D (no input)
  rnnsearch:  s_j = GRU(x_j + C c_j, s'_j)                 (either reset placement)
Backward, from ds_j (the output's gradient plus the next step's ds_{j-1}), back in time:
  (deep transition: ds_j back through GRU_D .. GRU_3 first, db_k = sum dx_k)
  dx2, ds' = the second GRU's backward step (gru_sequence);   dc_j = (output's dc_j) + dx2 W2^T
  dalpha_ji = (the output's dalpha_ji) + h_i . dc_j
  de_j = alpha_j (.) (dalpha_j - alpha_j . dalpha_j)           (softmax; zero where masked)
  dk_i += de_ji v (.) (1 - tanh^2(k_i + q_j)),  dq_j = sum_i (that),  dv += sum_i de_ji tanh(.)
  ds' += dq_j W_q^T
  cgru: dx_j, ds_{j-1} = GRU1's backward step;   rnnsearch: dx_j = dx2, ds_{j-1} = ds'
and after the loop, one product each over all steps: the recurrent kernels'
(sum_j state_{j-1}^T du_j), dW_q = sum_j s'_j^T dq_j, dW2 = sum_j c_j^T dx2_j, the biases (sums
of du and dx2) and dh_i = sum_j alpha_ji dc_j (the annotations' gradient through c).

With the state memory (cgru only; the memory RNN and self-attentive RNN of Werlen et al. 2018,
layers/self_attention.py StateMemory), GRU1 reads s~_j instead of s_{j-1}:
  m_i = W_m s_i + b_m (written once, when s_i is made),   p_j = W_s s_{j-1},
  beta_j = softmax over i < j of v_m^T tanh(m_i + p_j),   s~_j = sum_{i<j} beta_ji s_i.
The buffers S = [s_0..s_n] and M = [m_0..m_n] are complete after the forward loop and row i is
never changed after step i, so the backward loop reads the final buffers, carries their
gradients dS and dM, and adds row j's, dS_j + dM_j W_m^T, to ds_j when it reaches step j (all
later steps, the only readers of row j, are done by then):
  dS_i += beta_ji ds~_j,  de^m_j = beta_j (.) (S ds~_j - beta_j . S ds~_j),
  dM_i += de^m_ji v_m (.) (1 - tanh^2(m_i + p_j)),  ds_{j-1} = dp_j W_s^T
with ds~_j = GRU1's ds_{j-1} (plus the output's gradient of s~_j); after the loop
dW_m = sum_i s_i^T dM_i, db_m = sum_i dM_i, dW_s = sum_j s_{j-1}^T dp_j, and GRU1's recurrent
kernel's gradient takes s~_j in place of s_{j-1}.

The loop is composed of one part per feature, each a forward step, a backward step and the
products after the loop: `GRUStep` (gru_sequence.py; GRU1, GRU2 and each GRU of a deep
transition, with its layer norm and dropout mask), `_Attention`, `_ContextInput` (GRU2's
input, layer-normalized or not), `_DeepTransition` and `_StateMemory`. Each part saves its
values by name in the forward loop (a dict of TensorArrays) and reads them by name in the
backward loop.

The score's two passes are fused.py's: the XLA kernels with fused="xla" (the model's
KernelOptions, resolved once), else the same arithmetic in plain ops. Used while training by
CGRUDecoder (every variant) and RNNSearchDecoder, with soft additive attention; decoding and
export run their step-by-step code. The weights come typed (weights.py CGRUWeights,
RNNSearchWeights), inputs and outputs batch-major.
"""

import tensorflow as tf

from nmt_tf.layers.kernels import fused as fused_kernels
from nmt_tf.layers.kernels import precision
from nmt_tf.layers.kernels.gru_sequence import GRUStep, arrays_like, kernel_gradient
from nmt_tf.layers.kernels.gru_sequence import stack_steps, write_step
from nmt_tf.layers.kernels.layer_norm import segment_norm, segment_norm_backward
from nmt_tf.layers.kernels.masking import masked_softmax
from nmt_tf.layers.kernels.weights import AdditiveWeights, CGRUWeights, RNNSearchWeights
from nmt_tf.layers.kernels.weights import StateMemoryWeights, TransitionWeights, flatten
from nmt_tf.layers.kernels.weights import unflatten


def context_backward(memory, alpha, dc, d_alpha=None):
  """The scores' gradient [batch, src_len] float32 of c = sum_i alpha_i h_i with alpha =
  softmax(e) over real positions, from dc [batch, mem_dim] (and an output gradient of alpha):
  dalpha_i = h_i . dc + d_alpha_i,  de = alpha (.) (dalpha - alpha . dalpha)."""
  d_weights = tf.cast(tf.matmul(memory, dc[:, :, None])[:, :, 0], tf.float32)  # [batch, n]
  if d_alpha is not None:
    d_weights = d_weights + d_alpha
  return alpha * (d_weights - tf.reduce_sum(alpha * d_weights, -1, keepdims=True))


def cgru_sequence(inputs, initial_state, memory, keys, mask, weights, fused=False, drops=None):
  """Runs the conditional GRU over all target steps; see the module docstring.

  Args:
    inputs: [batch, time, 3*units], GRU1's input projections x.
    initial_state: s_0 [batch, units].
    memory: annotations h [batch, src_len, mem_dim]; keys: [batch, src_len, att_units].
    mask: [batch, src_len] bool, True at real source positions.
    weights: CGRUWeights, the kernels already in the product dtype (precision.weight); with
      its state_memory, GRU1 reads s~_j, the attention over the previous states.
    fused: the scores' kernels, "xla" or False (KernelOptions.fused_attention resolved).
    drops: optional recurrent dropout masks (m1, m2, m3, ...), each [batch, units], one per
      sequence and GRU: GRU1 reads U1 (m1 (.) s_{j-1}) (s~_j with the state memory), GRU2
      U2 (m2 (.) s'_j), a deep transition's GRU_k U_k (m_k (.) its input state)
      (gru_sequence.gru_forward).

  Returns:
    (states s_j [batch, time, units], contexts c_j [batch, time, mem_dim], attention weights
    alpha_j [batch, time, src_len] float32), and with the state memory the summaries s~_j
    [batch, time, units] as a fourth.
  """
  normalized = weights.gru2.gain is not None
  if normalized and (weights.gru1.gain is None or weights.context_gain is None):
    raise ValueError("Layer normalization in the attention loops needs the gains of both "
                     "GRUs and of GRU2's input (context_gain).")
  if drops is not None and (weights.gru2.bias is None
                            or len(drops) != 2 + len(weights.transitions)):
    raise ValueError("Recurrent dropout masks in the attention loops need reset-after GRUs "
                     "and one mask per GRU.")
  return _sequence(inputs, initial_state, memory, keys, mask, weights, fused, drops)


def rnnsearch_sequence(inputs, initial_state, memory, keys, mask, weights, fused=False):
  """Runs the RNNsearch decoder over all target steps; see the module docstring.

  Args:
    inputs: [batch, time, 3*units], the GRU's W E y + b.
    initial_state, memory, keys, mask, fused: as for `cgru_sequence`.
    weights: RNNSearchWeights; a GRU bias of None means the reset-before GRU (Bahdanau 2015).

  Returns:
    As `cgru_sequence`.
  """
  if weights.gru.gain is not None:
    raise ValueError("Layer normalization in the attention loops needs CGRUWeights.")
  return _sequence(inputs, initial_state, memory, keys, mask, weights, fused, None)


def _sequence(inputs, initial_state, memory, keys, mask, weights, fused, drops):
  drops = list(drops or ())

  @tf.custom_gradient
  def run(x, s0, memory, keys, *flat):
    w = unflatten(weights, flat[:len(flat) - len(drops)])
    loop = _Loop(w, x, s0, memory, keys, tf.cast(mask, tf.bool), fused,
                 flat[len(flat) - len(drops):])
    saved, buffers = loop.forward()

    def grad(d_states, d_contexts, d_alphas, d_reads=None):
      d_x, d_s0, d_memory, d_keys, d_weights = loop.backward(
          saved, buffers, {"s": d_states, "c": d_contexts, "alpha": d_alphas, "read": d_reads})
      return [d_x, d_s0, d_memory, d_keys] + flatten(d_weights) + [None] * len(drops)

    return loop.outputs(saved), grad

  outputs = run(tf.transpose(inputs, [1, 0, 2]), initial_state, memory, keys,
                *flatten(weights), *drops)  # time-major
  return tuple(tf.transpose(o, [1, 0, 2]) for o in outputs)  # [batch, time, ...] each


class _StepValues:
  """The values a loop saved, read at step t by name: `at["alpha"]` is alpha_t (a structure
  of values comes back in its structure). Only the values asked for are sliced."""

  def __init__(self, stacks, t):
    self.stacks, self.t = stacks, t

  def __getitem__(self, name):
    return tf.nest.map_structure(lambda stack: stack[self.t], self.stacks[name])


def _sums(d, like):
  """sum over time and batch of d [time, batch, dim], in like's dtype (a bias's gradient)."""
  return tf.cast(tf.reduce_sum(d, axis=[0, 1]), like.dtype)


class _Loop:
  """The decoder's step, forward and back, as its parts in order (module docstring):
  [state memory read] -> [GRU1] -> attention -> GRU2's input -> GRU2 -> [deep transition]
  -> [state memory write]. The per-step values saved (the forward dict) and the per-step
  gradients (the backward dict), by name:
    "s", "c", "alpha", "q": s_j, c_j, alpha_j, the query W_q s'_j;
    "inter", "gru1", "gru2": s'_j and each GRU's kept values (GRUStep.kept_like);
    "input": GRU2's layer-normalized input (a^, 1 / sigma); "deep": each transition GRU's
    input state and kept values; "read", "beta", "p": the state memory's s~_j, beta_j, p_j.
    Backward: "dq", "dc", "dx2", "dx1", "gru1", "gru2" (GRUStep's du, da), "d_input",
    "deep", "dp".
  """

  def __init__(self, w, x, s0, memory, keys, mask, fused, drops):
    self.w, self.x, self.s0 = w, x, s0
    self.cgru = isinstance(w, CGRUWeights)  # else RNNSearchWeights
    dtype = x.dtype
    drops = list(drops) or [None] * (2 + len(w.transitions if self.cgru else ()))
    self.gru1 = GRUStep(w.gru1, dtype, drops[0]) if self.cgru else None
    self.attention = _Attention(w.attention, memory, keys, mask, fused, dtype)
    self.context = _ContextInput(w, dtype)
    self.gru2 = GRUStep(w.gru2 if self.cgru else w.gru, dtype, drops[1])
    self.deep = None
    if self.cgru and w.transitions:
      self.deep = _DeepTransition(w.transitions, dtype, drops[2:])
    self.state_memory = None
    if self.cgru and w.state_memory is not None:
      self.state_memory = _StateMemory(w.state_memory, tf.shape(x)[0], fused, dtype)

  def step(self, t, s, buffers):
    """s_{j-1} -> s_j, the buffers after the step and the values saved at step j."""
    saved = {}
    s_read = s
    if self.state_memory:
      s_read, saved_memory = self.state_memory.read(t, s, buffers)  # s~_j
      saved.update(saved_memory)
    s_inter = s
    if self.gru1:
      s_inter, saved["gru1"] = self.gru1.forward(self.x[t], s_read)  # s'_j [batch, units]
      saved["inter"] = s_inter
    c, saved_attention = self.attention.forward(s_inter)  # c_j [batch, mem_dim]
    saved.update(saved_attention)
    x2, saved_input = self.context.forward(c, self.x[t])  # [batch, 3*units]
    saved.update(saved_input)
    s, saved["gru2"] = self.gru2.forward(x2, s_inter)
    if self.deep:
      s, saved["deep"] = self.deep.forward(s)
    saved["s"] = s
    if self.state_memory:
      buffers = self.state_memory.write(t, s, buffers)
    return s, buffers, saved

  def saved_like(self, buffers):
    x0, s0 = self.x[0], self.s0
    like = {"s": s0, **self.attention.saved_like(), **self.context.saved_like(x0, s0),
            "gru2": self.gru2.kept_like(x0, s0)}
    if self.gru1:
      like.update(inter=s0, gru1=self.gru1.kept_like(x0, s0))
    if self.deep:
      like["deep"] = self.deep.saved_like(x0, s0)
    if self.state_memory:
      like.update(self.state_memory.saved_like(s0, buffers))
    return like

  def forward(self):
    """The saved values stacked [time, batch, ...] by name, and the final buffers."""
    length = tf.shape(self.x)[0]
    buffers = self.state_memory.initial(self.s0) if self.state_memory else ()

    def body(t, s, buffers, arrays):
      s, buffers, saved = self.step(t, s, buffers)
      return t + 1, s, buffers, write_step(arrays, t, saved)

    _, _, buffers, arrays = tf.while_loop(
        lambda t, *_: t < length, body,
        (0, self.s0, buffers, arrays_like(self.saved_like(buffers), length)),
        maximum_iterations=length)
    saved = stack_steps(arrays)
    # s_{j-1}: what GRU1 (or the memory's query) reads, and rnnsearch's query state
    saved["prev"] = tf.concat([self.s0[None], saved["s"][:-1]], axis=0)
    if not self.gru1:
      saved["inter"] = saved["prev"]
    saved["gru1_input"] = saved["read"] if self.state_memory else saved["prev"]
    return saved, buffers

  def outputs(self, saved):
    names = ("s", "c", "alpha") + (("read",) if self.state_memory else ())
    return tuple(saved[name] for name in names)

  def back_step(self, t, ds, buffer_grads, at, buffers, d_out):
    """ds_j (the later steps' part) -> ds_{j-1}, dk_j, dv_j, the buffers' gradients and the
    per-step gradients; `at` reads the saved values of step t, `buffers` are the final ones,
    `d_out` the outputs' gradients."""
    grads = {}
    if d_out["s"] is not None:
      ds = ds + d_out["s"][t]
    if self.state_memory:
      ds = self.state_memory.add_row(ds, buffer_grads, t + 1)
    if self.deep:
      ds, grads["deep"] = self.deep.backward(ds, at)
    dx2, ds_inter, grads["gru2"] = self.gru2.backward(ds, at["inter"], at["gru2"])
    dc, input_grads = self.context.backward(dx2, at)
    grads.update(dx2=dx2, **input_grads)
    if d_out["c"] is not None:
      dc = dc + d_out["c"][t]
    d_alpha = None if d_out["alpha"] is None else d_out["alpha"][t]
    ds_query, dk, dv, attention_grads = self.attention.backward(dc, d_alpha, at)
    grads.update(attention_grads)
    ds_inter = ds_inter + ds_query
    ds_prev = ds_inter
    if self.gru1:
      grads["dx1"], ds_prev, grads["gru1"] = self.gru1.backward(ds_inter, at["gru1_input"],
                                                                at["gru1"])
    if self.state_memory:  # ds_prev is ds~_j
      if d_out["read"] is not None:
        ds_prev = ds_prev + d_out["read"][t]
      ds_prev, buffer_grads, grads["dp"] = self.state_memory.back_read(
          ds_prev, at, buffers, buffer_grads)
    return ds_prev, dk, dv, buffer_grads, grads

  def grads_like(self, saved):
    x0 = self.x[0]
    like = {"dx2": x0, **self.attention.grads_like(), **self.context.grads_like(x0),
            "gru2": self.gru2.grads_like(x0)}
    if self.gru1:
      like.update(dx1=x0, gru1=self.gru1.grads_like(x0))
    if self.deep:
      like["deep"] = self.deep.grads_like(x0)
    if self.state_memory:
      like["dp"] = saved["p"][0]
    return like

  def backward(self, saved, buffers, d_out):
    """(dx, ds_0, dh, dk, the weights' gradients) from the outputs' gradients `d_out`."""
    length = tf.shape(self.x)[0]
    keys, v = self.attention.keys, self.attention.v

    def back(t, ds, dk, dv, buffer_grads, arrays):
      ds, dk_t, dv_t, buffer_grads, grads = self.back_step(
          t, ds, buffer_grads, _StepValues(saved, t), buffers, d_out)
      return t - 1, ds, dk + dk_t, dv + dv_t, buffer_grads, write_step(arrays, t, grads)

    buffer_grads = self.state_memory.initial_grads(buffers) if self.state_memory else ()
    _, d_s0, d_keys, d_v, buffer_grads, arrays = tf.while_loop(
        lambda t, *_: t >= 0, back,
        (length - 1, tf.zeros_like(self.s0), tf.zeros_like(keys), tf.zeros_like(v),
         buffer_grads, arrays_like(self.grads_like(saved), length)),
        maximum_iterations=length)
    grads = stack_steps(arrays)  # [time, batch, ...] each
    attention, d_memory = self.attention.gradients(saved, grads, d_v)
    gru2 = self.gru2.weight_gradients(saved["inter"], saved["gru2"], grads["dx2"],
                                      grads["gru2"])
    if not self.cgru:
      d_w = RNNSearchWeights(attention, self.context.kernel_gradient(saved, grads), gru2)
      return grads["dx2"], d_s0, d_memory, d_keys, d_w
    memory_grads = None
    if self.state_memory:
      memory_grads = self.state_memory.gradients(saved, grads, buffers, buffer_grads)
      d_s0 = self.state_memory.add_row(d_s0, buffer_grads, 0)
    d_w = self.w._replace(
        gru1=self.gru1.weight_gradients(saved["gru1_input"], saved["gru1"], grads["dx1"],
                                        grads["gru1"]),
        attention=attention, gru2=gru2, state_memory=memory_grads,
        transitions=self.deep.gradients(saved, grads) if self.deep else (),
        **self.context.cgru_gradients(saved, grads))
    return grads["dx1"], d_s0, d_memory, d_keys, d_w


class _Attention:
  """Soft additive attention of s'_j over the annotations h_i, keys k_i = U_a h_i + b_a:
    q_j = W_q s'_j,  e_ji = v^T tanh(k_i + q_j),  alpha_j = softmax(e_j),  c_j = sum alpha_ji h_i
  Backward: de_j from dc_j and dalpha_j (`context_backward`), then dk_i, dq_j, dv (fused.py
  `score_gradient`), ds'_j += dq_j W_q^T; after the loop dW_q = sum s'_j^T dq_j and
  dh_i = sum_j alpha_ji dc_j."""

  def __init__(self, weights, memory, keys, mask, fused, dtype):
    self.weights, self.memory, self.keys, self.mask = weights, memory, keys, mask
    self.fused, self.dtype = fused, dtype
    self.query_kernel = weights.query_kernel
    self.v = tf.cast(weights.v, keys.dtype)

  def saved_like(self):
    return {"q": self.keys[:, 0], "c": self.memory[:, 0],
            "alpha": tf.TensorSpec(self.mask.shape, tf.float32)}

  def grads_like(self):
    return {"dq": self.keys[:, 0], "dc": self.memory[:, 0]}

  def forward(self, query_state):
    q = tf.cast(precision.matmul(query_state, self.query_kernel), self.keys.dtype)  # [b, att]
    scores = fused_kernels.additive_score(self.keys, q, self.v, self.fused)  # [batch, src_len]
    alpha = masked_softmax(scores, self.mask)  # [batch, src_len] float32
    c = tf.matmul(tf.cast(alpha, self.memory.dtype)[:, None, :], self.memory)[:, 0]
    return c, {"q": q, "alpha": alpha, "c": c}

  def backward(self, dc, d_alpha, at):
    """(ds' [batch, units], dk_j, dv_j, the per-step gradients) from dc_j [batch, mem_dim]."""
    d_scores = context_backward(self.memory, at["alpha"], dc, d_alpha)
    dk, dq, dv = fused_kernels.score_gradient(self.keys, at["q"], self.v, d_scores, self.fused)
    ds = precision.matmul(tf.cast(dq, self.dtype), self.query_kernel, transpose_b=True)
    return ds, dk, dv, {"dq": dq, "dc": dc}

  def gradients(self, saved, grads, d_v):
    """(AdditiveWeights of the gradients, dh [batch, src_len, mem_dim])."""
    weights = AdditiveWeights(kernel_gradient(saved["inter"], grads["dq"], self.query_kernel),
                              tf.cast(d_v, self.weights.v.dtype))
    d_memory = tf.einsum("tbn,tbm->bnm", tf.cast(saved["alpha"], self.memory.dtype),
                         grads["dc"])
    return weights, d_memory


class _ContextInput:
  """GRU2's input from the context, x2_j = W2 c_j + b2 (cgru; with layer norm
  g2 (.) LN(W2 c_j) + b2), or the GRU's x_j + C c_j (rnnsearch). Backward: dc_j = d(W2 c_j)
  W2^T, through `segment_norm_backward` with layer norm; after the loop dW2 = sum c_j^T
  d(W2 c_j), db2 = sum dx2_j, dg2 = sum dx2_j (.) a^_j."""

  def __init__(self, w, dtype):
    self.w = w
    self.cgru = isinstance(w, CGRUWeights)
    self.kernel = w.context_kernel
    self.normalized = self.cgru and w.context_gain is not None
    self.bias = tf.cast(w.context_bias, dtype) if self.cgru else None
    self.gain = tf.cast(w.context_gain, dtype) if self.normalized else None

  def saved_like(self, x0, s0):
    return {"input": (x0, tf.TensorSpec(s0.shape[:1] + [2], s0.dtype))} if self.normalized else {}

  def grads_like(self, x0):
    return {"d_input": x0} if self.normalized else {}

  def forward(self, c, x_t):
    a = precision.matmul(c, self.kernel)  # W2 c_j [batch, 3*units]
    saved = {}
    if self.normalized:
      hat, inv = segment_norm(a, self.units(a))
      a, saved = hat * self.gain, {"input": (hat, inv)}
    return a + (self.bias if self.cgru else x_t), saved

  def backward(self, dx2, at):
    """(dc [batch, mem_dim], the per-step gradients) from GRU2's dx2 [batch, 3*units]."""
    if not self.normalized:
      return precision.matmul(dx2, self.kernel, transpose_b=True), {}
    hat, inv = at["input"]
    d_a = segment_norm_backward(dx2 * self.gain, hat, inv, self.units(dx2))
    return precision.matmul(d_a, self.kernel, transpose_b=True), {"d_input": d_a}

  def kernel_gradient(self, saved, grads):
    d_a = grads["d_input"] if self.normalized else grads["dx2"]  # the gradients of W2 c_j
    return kernel_gradient(saved["c"], d_a, self.kernel)

  def cgru_gradients(self, saved, grads):
    """The CGRUWeights fields of GRU2's input: context_kernel, context_bias, context_gain."""
    gain = None
    if self.normalized:
      gain = _sums(grads["dx2"] * saved["input"][0], self.w.context_gain)
    return {"context_kernel": self.kernel_gradient(saved, grads),
            "context_bias": _sums(grads["dx2"], self.w.context_bias), "context_gain": gain}

  @staticmethod
  def units(a):
    return a.shape[-1] // 3


class _DeepTransition:
  """The GRUs after GRU2 (Miceli Barone et al. 2017): s_j <- GRU_k(b_k, s_j), k = 3..D, no
  input but the bias b_k. Backward: ds_j back through GRU_D .. GRU_3 first; after the loop
  db_k = sum dx_k and GRU_k's weights' gradients."""

  def __init__(self, transitions, dtype, drops):
    self.transitions = transitions
    self.steps = [(tf.cast(tw.bias, dtype)[None], GRUStep(tw.gru, dtype, drop))
                  for tw, drop in zip(transitions, drops)]

  def saved_like(self, x0, s0):
    return tuple((s0, step.kept_like(x0, s0)) for _, step in self.steps)

  def grads_like(self, x0):
    return tuple({"dx": x0, **step.grads_like(x0)} for _, step in self.steps)

  def forward(self, s):
    saved = []
    for bias, step in self.steps:  # GRU_k(b_k, s) [batch, units]
      s_in = s
      s, kept = step.forward(bias, s_in)
      saved.append((s_in, kept))
    return s, tuple(saved)

  def backward(self, ds, at):
    grads = []
    for (_, step), (s_in, kept) in reversed(list(zip(self.steps, at["deep"]))):
      dx, ds, step_grads = step.backward(ds, s_in, kept)
      grads.insert(0, {"dx": dx, **step_grads})
    return ds, tuple(grads)

  def gradients(self, saved, grads):
    return tuple(TransitionWeights(_sums(g["dx"], tw.bias),
                                   step.weight_gradients(s_in, kept, g["dx"], g))
                 for tw, (_, step), (s_in, kept), g in zip(self.transitions, self.steps,
                                                           saved["deep"], grads["deep"]))


class _StateMemory:
  """The memory RNN's attention over the previous states (module docstring): GRU1 reads
  s~_j = sum_{i<j} beta_ji s_i, beta_j = softmax(v_m^T tanh(m_i + W_s s_{j-1})), from the
  buffers S = [s_0..s_n] and M = [m_0..m_n], m_i = W_m s_i + b_m. The backward loop carries
  the buffers' gradients (dS, dM, dv_m, in float32: bfloat16 sums of many small terms drift)
  and adds row j's to ds_j when it reaches step j."""

  def __init__(self, weights, length, fused, dtype):
    self.weights, self.fused, self.dtype = weights, fused, dtype
    self.key_kernel, self.query_kernel = weights.key_kernel, weights.score.query_kernel
    self.key_bias = tf.cast(weights.key_bias, dtype)
    self.v = tf.cast(weights.score.v, dtype)
    self.length = length
    self.rows = tf.range(length + 1)  # buffer rows 0..n

  def _write(self, buffer, t, value):  # row t of buffer [batch, n + 1, dim] := value [b, dim]
    return tf.where((self.rows == t)[None, :, None], value[:, None, :], buffer)

  def _keys(self, s):
    return precision.matmul(s, self.key_kernel) + self.key_bias  # m [batch, mem_units]

  def initial(self, s0):
    """S, M [batch, n + 1, units|mem_units] holding s_0 and m_0 in row 0."""
    rows = self.length + 1
    return tuple(self._write(tf.tile(tf.zeros_like(row)[:, None], [1, rows, 1]), 0, row)
                 for row in (s0, self._keys(s0)))

  def saved_like(self, s0, buffers):
    keys = buffers[1]
    return {"read": s0, "beta": tf.TensorSpec(keys.shape[:2], tf.float32), "p": keys[:, 0]}

  def read(self, t, s, buffers):
    states, keys = buffers
    p = precision.matmul(s, self.query_kernel)  # p_j = W_s s_{j-1} [batch, mem_units]
    scores = fused_kernels.additive_score(keys, p, self.v, self.fused)  # [batch, n + 1]
    beta = masked_softmax(scores, (self.rows <= t)[None])  # [batch, n + 1] float32
    s_read = tf.matmul(tf.cast(beta, self.dtype)[:, None, :], states)[:, 0]  # s~_j
    return s_read, {"read": s_read, "beta": beta, "p": p}

  def write(self, t, s, buffers):
    states, keys = buffers
    return self._write(states, t + 1, s), self._write(keys, t + 1, self._keys(s))

  def initial_grads(self, buffers):
    return tuple(tf.zeros_like(b, tf.float32) for b in buffers + (self.v,))

  def add_row(self, ds, buffer_grads, row):
    """ds plus the gradient of the state in buffer row `row` through S and M: at step j,
    row j + 1 holds s_j and all its readers are done; after the loop, row 0 holds s_0."""
    d_states, d_keys, _ = buffer_grads
    return ds + tf.cast(d_states[:, row], self.dtype) + precision.matmul(
        tf.cast(d_keys[:, row], self.dtype), self.key_kernel, transpose_b=True)

  def back_read(self, ds_read, at, buffers, buffer_grads):
    """ds~_j -> (ds_{j-1}, the buffers' gradients, dp_j); `buffers` are the final S, M."""
    d_states, d_keys, d_v = buffer_grads
    beta = at["beta"]
    d_states += beta[:, :, None] * tf.cast(ds_read, tf.float32)[:, None]
    d_scores = context_backward(buffers[0], beta, ds_read)  # [batch, n + 1]
    dm, dp, dv = fused_kernels.score_gradient(buffers[1], at["p"], self.v, d_scores,
                                              self.fused)
    buffer_grads = (d_states, d_keys + tf.cast(dm, tf.float32), d_v + tf.cast(dv, tf.float32))
    return precision.matmul(dp, self.query_kernel, transpose_b=True), buffer_grads, dp

  def gradients(self, saved, grads, buffers, buffer_grads):
    """StateMemoryWeights of the gradients."""
    _, d_keys, d_v = buffer_grads
    weights = StateMemoryWeights(
        kernel_gradient(buffers[0], d_keys, self.key_kernel),
        _sums(d_keys, self.weights.key_bias),
        AdditiveWeights(kernel_gradient(saved["prev"], grads["dp"], self.query_kernel),
                        tf.cast(d_v, self.weights.score.v.dtype)))
    return weights
