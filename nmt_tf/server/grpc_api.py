"""TF Serving's gRPC API (`tensorflow_serving.apis`) over a Service, as the model server's
`--port` answers it, so that `PredictionServiceStub` clients (export/client.py --server) talk to
`nmt-tf serve --grpc_port` unchanged.

  PredictionService.Predict           inputs as TensorProtos [batch], outputs likewise
                                      (output_filter honoured)
  PredictionService.GetModelMetadata  metadata_field "signature_def": a SignatureDefMap
  ModelService.GetModelStatus         each version AVAILABLE, or END with its load error
  ModelService.HandleReloadConfigRequest  a new ModelServerConfig: its models served, once
                                      loaded, and only them (reload.py); a config that cannot
                                      be served is INVALID_ARGUMENT and changes nothing

Classify, Regress and MultiInference answer UNIMPLEMENTED, as for a model without such
signatures. A refused request gets the code of its RequestError (errors.CODE_NAMES) and a one-line
message; the server goes on.
"""

import time

import grpc
import tensorflow as tf
from google.protobuf import json_format
from tensorflow.core.framework import types_pb2
from tensorflow_serving.apis import get_model_metadata_pb2
from tensorflow_serving.apis import get_model_status_pb2
from tensorflow_serving.apis import model_management_pb2
from tensorflow_serving.apis import model_service_pb2_grpc
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc

from nmt_tf.server import model_config
from nmt_tf.server.errors import check_batch_sizes, CODE_NAMES, RequestError


async def start(service, address, watcher):
  """A started grpc.aio server answering for `service` (service.py) at `address`
  ("host:port"), in the running event loop; `watcher` (reload.Watcher) reloads configs."""
  max_bytes = service.limits.max_body_bytes
  server = grpc.aio.server(options=[("grpc.max_receive_message_length", max_bytes),
                                    ("grpc.max_send_message_length", -1),
                                    ("grpc.so_reuseport", 0)])
  prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
      PredictionService(service), server)
  model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelService(service, watcher),
                                                       server)
  try:
    bound = server.add_insecure_port(address)
  except RuntimeError:  # grpcio raises where older versions returned 0
    bound = 0
  if not bound:
    raise OSError(f"cannot listen on {address} for gRPC; pass another --grpc_port.")
  await server.start()
  return server


def _model(spec):
  """(name, version, label) of a ModelSpec, as Service.resolve takes them."""
  choice = spec.WhichOneof("version_choice")
  return (spec.name, spec.version.value if choice == "version" else None,
          spec.version_label if choice == "version_label" else None)


class _Servicer:
  """What both services share: the Service, and each answer counted in its metrics."""

  def __init__(self, service):
    self.service = service

  async def answer(self, api, request, context, work):
    """The answer of coroutine work() to `request` (a message with a model_spec); a
    RequestError aborts the call with its code (errors.CODE_NAMES) and one-line message."""
    start, status = time.perf_counter(), "OK"
    try:
      return await work()
    except RequestError as error:
      status = CODE_NAMES.get(error.status, "INVALID_ARGUMENT")
      await context.abort(grpc.StatusCode[status], str(error))
    finally:
      self.service.count(request.model_spec.name, api, "GRPC", status,
                         time.perf_counter() - start)


class PredictionService(_Servicer, prediction_service_pb2_grpc.PredictionServiceServicer):
  """Predict and GetModelMetadata of TF Serving's PredictionService."""

  async def Predict(self, request, context):  # pylint: disable=invalid-name
    async def work():
      version, outputs = await self.service.predict(
          _model(request.model_spec), request.model_spec.signature_name,
          lambda dtypes: read_inputs(request.inputs, dtypes, self.service.limits.max_batch_size))
      if request.output_filter:
        unknown = [k for k in request.output_filter if k not in outputs]
        if unknown:
          raise RequestError(f"output tensor alias not found in signature: {unknown[0]}; "
                             f"the signature has {sorted(outputs)}.")
        outputs = {k: outputs[k] for k in request.output_filter}
      response = predict_pb2.PredictResponse()
      response.model_spec.name = request.model_spec.name
      response.model_spec.version.value = version
      response.model_spec.signature_name = (request.model_spec.signature_name or
                                            "serving_default")
      for name, value in outputs.items():
        response.outputs[name].CopyFrom(tf.make_tensor_proto(value))
      return response
    return await self.answer("Predict", request, context, work)

  async def GetModelMetadata(self, request, context):  # pylint: disable=invalid-name
    async def work():
      servable, version = self.service.resolve(*_model(request.model_spec))
      if not request.metadata_field:
        raise RequestError("GetModelMetadataRequest must specify at least one metadata_field")
      for field in request.metadata_field:
        if field != "signature_def":
          raise RequestError(f"Metadata field {field} is not supported")
      metadata = self.service.metadata(servable, version)
      response = get_model_metadata_pb2.GetModelMetadataResponse()
      json_format.ParseDict(metadata["model_spec"], response.model_spec)
      defs = json_format.ParseDict(metadata["metadata"]["signature_def"],
                                   get_model_metadata_pb2.SignatureDefMap())
      response.metadata["signature_def"].Pack(defs)
      return response
    return await self.answer("GetModelMetadata", request, context, work)


class ModelService(_Servicer, model_service_pb2_grpc.ModelServiceServicer):
  """GetModelStatus and HandleReloadConfigRequest of TF Serving's ModelService."""

  def __init__(self, service, watcher):
    super().__init__(service)
    self.watcher = watcher

  async def HandleReloadConfigRequest(self, request, context):  # pylint: disable=invalid-name
    try:
      await self.watcher.reload(model_config.entries(request.config, "ReloadConfigRequest"))
    except (RequestError, model_config.ModelConfigError) as error:
      await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
    return model_management_pb2.ReloadConfigResponse()  # status: OK

  async def GetModelStatus(self, request, context):  # pylint: disable=invalid-name
    async def work():
      servable, version = self.service.resolve(*_model(request.model_spec), failed=True)
      named = request.model_spec.WhichOneof("version_choice") is not None
      return json_format.ParseDict(self.service.status(servable, [version] if named else None),
                                   get_model_status_pb2.GetModelStatusResponse())
    return await self.answer("GetModelStatus", request, context, work)


def read_inputs(protos, dtypes, max_rows):
  """{input name: numpy [batch]} of a PredictRequest's inputs for a signature whose inputs
  have `dtypes` ({name: dtype name}): each a vector of its input's dtype, of at most
  `max_rows` values (checked before the tensor is read), all of one length."""
  missing = [n for n in sorted(dtypes) if n not in protos]
  extra = [n for n in sorted(protos) if n not in dtypes]
  if missing or extra:
    raise RequestError((f"the request lacks the input {missing[0]!r}" if missing else
                        f"the request has the unknown input {extra[0]!r}") +
                       f"; this signature takes {sorted(dtypes)}.")
  inputs = {}
  for name in sorted(dtypes):
    proto = protos[name]
    want = tf.as_dtype(dtypes[name]).as_datatype_enum
    if proto.dtype != want:
      raise RequestError(f"The input {name!r} is {types_pb2.DataType.Name(proto.dtype)}; "
                         f"this signature takes {types_pb2.DataType.Name(want)}.")
    dims = [d.size for d in proto.tensor_shape.dim]
    if proto.tensor_shape.unknown_rank or len(dims) != 1:
      raise RequestError(f"The input {name!r} has shape {dims}; this signature takes a "
                         "vector [batch], one value per row.")
    if dims[0] > max_rows:
      raise RequestError(f"The request has {dims[0]} rows; this server takes at most "
                         f"{max_rows} in one request (--max_batch_size).")
    try:
      value = tf.make_ndarray(proto)
    except (TypeError, ValueError) as error:
      raise RequestError(f"The input {name!r} does not read as a tensor of shape {dims} "
                         f"({error}).") from None
    inputs[name] = value.astype(object) if value.dtype.kind in "SO" else value
  check_batch_sizes(inputs)
  return inputs

