"""nmt_tf.export: the SavedModel for TF Serving and the LiteRT model (docs/EXPORT.md).

  path = export_run("runs/quickstart")  # runs/quickstart/export/nmt/1
  path = export_litert("runs/quickstart")  # runs/quickstart/export/nmt_litert/1
"""

from nmt_tf.export.exporter import (DEFAULT_MAX_SOURCE_LENGTH, ExportError, export_run,
                                    METADATA_FILE, next_version)
from nmt_tf.export.litert import export_litert, LiteRTExportError, QUANTIZATIONS
from nmt_tf.export.ops import (allowed_ops, check_forbidden_ops, disallowed_ops,
                               FORBIDDEN_OPS, ForbiddenOpError, saved_model_ops, TF_TEXT_OPS)
from nmt_tf.export.serving import clean_text, ServingModule, SIGNATURES
from nmt_tf.export.warmup import WARMUP_FILE, warmup_requests, write_warmup_file
