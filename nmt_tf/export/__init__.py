"""nmt_tf.export."""
