"""Custom Keras layers: recurrent cells, attention, conditional GRU, self-attention, outputs.

The layers state their equations; their products and training loops go through the speed
kernels of the subpackage `nmt_tf.layers.kernels` (one interface, KernelOptions choose the
paths).
"""

from nmt_tf.layers.attention import BahdanauAttention, LuongAttention, make_attention
from nmt_tf.layers.conditional_gru import ConditionalGRUCell
from nmt_tf.layers.deep_output import Bridge, DeepOutput
from nmt_tf.layers.gru import GRUCell
from nmt_tf.layers.lstm import LSTMCell
from nmt_tf.layers.recurrence import scan_time
from nmt_tf.layers.self_attention import SelfAttentiveResidual, StateAttention, StateMemory

__all__ = [
    "BahdanauAttention", "LuongAttention", "make_attention", "ConditionalGRUCell", "Bridge",
    "DeepOutput", "GRUCell", "LSTMCell", "scan_time", "SelfAttentiveResidual", "StateAttention",
    "StateMemory",
]
