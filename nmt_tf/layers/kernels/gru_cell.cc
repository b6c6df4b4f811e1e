// The elementwise work of one recurrent step, forward and backward, as TensorFlow CPU ops: the
// GRU's gates and the additive attention score.
//
// docs/EQUATIONS.md, "GRU conventions"; x = W x_t + b = [x_z, x_r, x_h] and the products
// with the recurrent kernel U stay TensorFlow's (layers/gru.py `GRUCell.step` makes them):
//
//   NmtGruGates        reset after: hu = U h + b_U = [u_z, u_r, u_h]
//                        z = sigma(x_z + u_z), r = sigma(x_r + u_r), h~ = tanh(x_h + r u_h)
//                        h' = z h + (1 - z) h~                    -> h', gates [z, r, h~]
//   NmtGruResetGates   reset before, before U_h: hu = U_zr h = [u_z, u_r]
//                        z, r as above                            -> zr [z, r], rh = r h
//   NmtGruUpdate       reset before, after U_h: u = U_h (r h)
//                        h~ = tanh(x_h + u), h' = z h + (1 - z) h~  -> h', h~
//
// Each op makes one pass over its rows: every gate is computed once, with Eigen's vectorized
// logistic and tanh, and the rows are shared out over the intra-op thread pool. The *Grad
// ops give the gradients of the inputs from those of the first outputs and the kept
// activations (the second outputs). Float32 only: other dtypes take the plain ops.

#define EIGEN_USE_THREADS

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/util/work_sharder.h"

namespace {

using tensorflow::DEVICE_CPU;
using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShape;
using tensorflow::shape_inference::DimensionHandle;
using tensorflow::shape_inference::InferenceContext;
using tensorflow::shape_inference::ShapeHandle;

using Row = Eigen::Map<Eigen::ArrayXf>;
using ConstRow = Eigen::Map<const Eigen::ArrayXf>;

// Shape functions: inputs [batch, k * units]; output i is [batch, widths[i] * units], units
// from input `unit_input` whose width is `unit_width` units.
tensorflow::Status Shapes(InferenceContext* c, int unit_input, int unit_width,
                          std::initializer_list<int> widths) {
  ShapeHandle in;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(unit_input), 2, &in));
  DimensionHandle batch = c->Dim(in, 0);
  DimensionHandle units;
  TF_RETURN_IF_ERROR(c->Divide(c->Dim(in, 1), unit_width, true, &units));
  int i = 0;
  for (int width : widths) {
    DimensionHandle dim;
    TF_RETURN_IF_ERROR(c->Multiply(units, width, &dim));
    c->set_output(i++, c->Matrix(batch, dim));
  }
  return tensorflow::OkStatus();
}

// The rows of one call: checks that input i is [batch, in_widths[i] * units] (units from input
// `unit_input`, [batch, unit_width * units]), allocates outputs of out_widths * units, and runs
// `row(b)` for every row b over the intra-op threads.
class Rows {
 public:
  // Returns false (with the context's status set) if the inputs do not fit.
  bool Prepare(OpKernelContext* context, std::initializer_list<int> in_widths,
               std::initializer_list<int> out_widths, int unit_input, int unit_width) {
    const Tensor& ref = context->input(unit_input);
    if (ref.dims() != 2 || ref.dim_size(1) % unit_width != 0) {
      context->SetStatus(tensorflow::errors::InvalidArgument(
          "expected input ", unit_input, " of shape [batch, ", unit_width, " * units], got ",
          ref.shape().DebugString()));
      return false;
    }
    batch_ = ref.dim_size(0);
    units_ = ref.dim_size(1) / unit_width;
    int i = 0;
    for (int width : in_widths) {
      const Tensor& t = context->input(i);
      if (t.dims() != 2 || t.dim_size(0) != batch_ || t.dim_size(1) != width * units_) {
        context->SetStatus(tensorflow::errors::InvalidArgument(
            "input ", i, " must be [", batch_, ", ", width * units_, "], got ",
            t.shape().DebugString()));
        return false;
      }
      in_.push_back(t.flat<float>().data());
      ++i;
    }
    i = 0;
    for (int width : out_widths) {
      Tensor* t = nullptr;
      auto status = context->allocate_output(i++, TensorShape({batch_, width * units_}), &t);
      if (!status.ok()) {
        context->SetStatus(status);
        return false;
      }
      out_.push_back(t->flat<float>().data());
    }
    return true;
  }

  template <typename F>
  void ForRows(OpKernelContext* context, int64_t flops_per_unit, F row) {
    auto* workers = context->device()->tensorflow_cpu_worker_threads();
    tensorflow::Shard(workers->num_threads, workers->workers, batch_, flops_per_unit * units_,
                      [&](int64_t begin, int64_t end) {
                        for (int64_t b = begin; b < end; ++b) row(b);
                      });
  }

  // Row b of input or output i ([batch, width * units]), the units from part * units on.
  ConstRow In(int i, int width, int64_t b, int part) const {
    return ConstRow(in_[i] + (b * width + part) * units_, units_);
  }
  Row Out(int i, int width, int64_t b, int part) const {
    return Row(out_[i] + (b * width + part) * units_, units_);
  }

 private:
  int64_t batch_ = 0, units_ = 0;
  std::vector<const float*> in_;
  std::vector<float*> out_;
};

// A kernel runs a fresh Body per call (a kernel object serves concurrent calls).
template <typename Body>
class CallKernel : public OpKernel {
 public:
  explicit CallKernel(OpKernelConstruction* context) : OpKernel(context) {}
  void Compute(OpKernelContext* context) override { Body().Run(context); }
};

// ---- reset after -------------------------------------------------------------------------

struct GruGates : Rows {
  void Run(OpKernelContext* c) {  // x [b, 3u], hu [b, 3u], h [b, u] -> h' [b, u], gates [b, 3u]
    if (!Prepare(c, {3, 3, 1}, {1, 3}, 0, 3)) return;
    ForRows(c, 40, [&](int64_t b) {
      Row z = Out(1, 3, b, 0), r = Out(1, 3, b, 1), hh = Out(1, 3, b, 2);
      z = (In(0, 3, b, 0) + In(1, 3, b, 0)).logistic();
      r = (In(0, 3, b, 1) + In(1, 3, b, 1)).logistic();
      hh = (In(0, 3, b, 2) + r * In(1, 3, b, 2)).tanh();
      Out(0, 1, b, 0) = hh + z * (In(2, 1, b, 0) - hh);
    });
  }
};

struct GruGatesGrad : Rows {
  // dh' [b, u], hu [b, 3u], h [b, u], gates [b, 3u] -> dx [b, 3u], dhu [b, 3u], dh [b, u]
  void Run(OpKernelContext* c) {
    if (!Prepare(c, {1, 3, 1, 3}, {3, 3, 1}, 1, 3)) return;
    ForRows(c, 30, [&](int64_t b) {
      ConstRow dh = In(0, 1, b, 0), u_h = In(1, 3, b, 2), h = In(2, 1, b, 0);
      ConstRow z = In(3, 3, b, 0), r = In(3, 3, b, 1), hh = In(3, 3, b, 2);
      Row da_z = Out(0, 3, b, 0), da_r = Out(0, 3, b, 1), da_h = Out(0, 3, b, 2);
      da_h = dh * (1.0f - z) * (1.0f - hh * hh);
      da_z = dh * (h - hh) * z * (1.0f - z);
      da_r = da_h * u_h * r * (1.0f - r);
      Out(1, 3, b, 0) = da_z;
      Out(1, 3, b, 1) = da_r;
      Out(1, 3, b, 2) = da_h * r;
      Out(2, 1, b, 0) = dh * z;
    });
  }
};

// ---- reset before ------------------------------------------------------------------------

struct GruResetGates : Rows {
  void Run(OpKernelContext* c) {  // x [b, 3u], hu_zr [b, 2u], h [b, u] -> zr [b, 2u], rh [b, u]
    if (!Prepare(c, {3, 2, 1}, {2, 1}, 0, 3)) return;
    ForRows(c, 25, [&](int64_t b) {
      Out(0, 2, b, 0) = (In(0, 3, b, 0) + In(1, 2, b, 0)).logistic();
      Row r = Out(0, 2, b, 1);
      r = (In(0, 3, b, 1) + In(1, 2, b, 1)).logistic();
      Out(1, 1, b, 0) = r * In(2, 1, b, 0);
    });
  }
};

struct GruResetGatesGrad : Rows {
  // dzr [b, 2u], drh [b, u], zr [b, 2u], h [b, u] -> dx [b, 3u], dhu_zr [b, 2u], dh [b, u]
  void Run(OpKernelContext* c) {
    if (!Prepare(c, {2, 1, 2, 1}, {3, 2, 1}, 3, 1)) return;
    ForRows(c, 20, [&](int64_t b) {
      ConstRow drh = In(1, 1, b, 0), z = In(2, 2, b, 0), r = In(2, 2, b, 1), h = In(3, 1, b, 0);
      Row da_z = Out(0, 3, b, 0), da_r = Out(0, 3, b, 1);
      da_z = In(0, 2, b, 0) * z * (1.0f - z);
      da_r = (In(0, 2, b, 1) + drh * h) * r * (1.0f - r);
      Out(0, 3, b, 2).setZero();
      Out(1, 2, b, 0) = da_z;
      Out(1, 2, b, 1) = da_r;
      Out(2, 1, b, 0) = drh * r;
    });
  }
};

struct GruUpdate : Rows {
  // x [b, 3u], u [b, u], h [b, u], zr [b, 2u] -> h' [b, u], h~ [b, u]
  void Run(OpKernelContext* c) {
    if (!Prepare(c, {3, 1, 1, 2}, {1, 1}, 0, 3)) return;
    ForRows(c, 25, [&](int64_t b) {
      Row hh = Out(1, 1, b, 0);
      hh = (In(0, 3, b, 2) + In(1, 1, b, 0)).tanh();
      Out(0, 1, b, 0) = hh + In(3, 2, b, 0) * (In(2, 1, b, 0) - hh);
    });
  }
};

struct GruUpdateGrad : Rows {
  // dh' [b, u], h [b, u], zr [b, 2u], h~ [b, u] -> dx [b, 3u], du [b, u], dh [b, u], dzr [b, 2u]
  void Run(OpKernelContext* c) {
    if (!Prepare(c, {1, 1, 2, 1}, {3, 1, 1, 2}, 1, 1)) return;
    ForRows(c, 20, [&](int64_t b) {
      ConstRow dh = In(0, 1, b, 0), h = In(1, 1, b, 0), z = In(2, 2, b, 0), hh = In(3, 1, b, 0);
      Row da_h = Out(0, 3, b, 2);
      da_h = dh * (1.0f - z) * (1.0f - hh * hh);
      Out(0, 3, b, 0).setZero();
      Out(0, 3, b, 1).setZero();
      Out(1, 1, b, 0) = da_h;
      Out(2, 1, b, 0) = dh * z;
      Out(3, 2, b, 0) = dh * (h - hh);
      Out(3, 2, b, 1).setZero();
    });
  }
};

// ---- additive attention score --------------------------------------------------------------
//   NmtAdditiveScore   keys k [b, n, u], query q [b, u], v [u] -> e [b, n],
//                        e_i = v^T tanh(k_i + q)
//   NmtAdditiveScoreGrad  (k, q, v, de [b, n]) -> dk [b, n, u], dq [b, u], dv [u]:
//                        dk_i = de_i v (.) (1 - tanh^2(k_i + q)), dq = sum_i dk_i,
//                        dv = sum_b sum_i de_i tanh(k_i + q)   (the tanh recomputed, not kept)
// One pass over the keys per call, rows b shared out over the intra-op threads.

class ScoreKernel : public OpKernel {
 public:
  explicit ScoreKernel(OpKernelConstruction* context) : OpKernel(context) {}

 protected:
  // Checks k [b, n, u], q [b, u], v [u]; sets batch_, length_, units_.
  bool Shapes(OpKernelContext* context) {
    const Tensor &k = context->input(0), &q = context->input(1), &v = context->input(2);
    bool ok = k.dims() == 3 && q.dims() == 2 && v.dims() == 1 &&
              q.dim_size(0) == k.dim_size(0) && q.dim_size(1) == k.dim_size(2) &&
              v.dim_size(0) == k.dim_size(2);
    if (!ok) {
      context->SetStatus(tensorflow::errors::InvalidArgument(
          "expected keys [batch, n, units], query [batch, units] and v [units], got ",
          k.shape().DebugString(), ", ", q.shape().DebugString(), ", ",
          v.shape().DebugString()));
      return false;
    }
    batch_ = k.dim_size(0);
    length_ = k.dim_size(1);
    units_ = k.dim_size(2);
    return true;
  }

  template <typename F>
  void ForRows(OpKernelContext* context, int64_t flops_per_key, F row) {
    auto* workers = context->device()->tensorflow_cpu_worker_threads();
    tensorflow::Shard(workers->num_threads, workers->workers, batch_,
                      flops_per_key * length_ * units_, [&](int64_t begin, int64_t end) {
                        for (int64_t b = begin; b < end; ++b) row(b);
                      });
  }

  int64_t batch_ = 0, length_ = 0, units_ = 0;
};

class AdditiveScore : public ScoreKernel {
 public:
  using ScoreKernel::ScoreKernel;
  void Compute(OpKernelContext* context) override {
    if (!Shapes(context)) return;
    Tensor* e = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({batch_, length_}), &e));
    const float* k = context->input(0).flat<float>().data();
    const float* q = context->input(1).flat<float>().data();
    ConstRow v(context->input(2).flat<float>().data(), units_);
    float* out = e->flat<float>().data();
    ForRows(context, 20, [&](int64_t b) {
      ConstRow query(q + b * units_, units_);
      for (int64_t i = 0; i < length_; ++i) {
        ConstRow key(k + (b * length_ + i) * units_, units_);
        out[b * length_ + i] = ((key + query).tanh() * v).sum();
      }
    });
  }
};

class AdditiveScoreGrad : public ScoreKernel {
 public:
  using ScoreKernel::ScoreKernel;
  void Compute(OpKernelContext* context) override {
    if (!Shapes(context)) return;
    Tensor *dk = nullptr, *dq = nullptr, *dv = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(
                                0, TensorShape({batch_, length_, units_}), &dk));
    OP_REQUIRES_OK(context, context->allocate_output(1, TensorShape({batch_, units_}), &dq));
    OP_REQUIRES_OK(context, context->allocate_output(2, TensorShape({units_}), &dv));
    Tensor dv_rows;  // per row b, summed after the rows
    OP_REQUIRES_OK(context, context->allocate_temp(tensorflow::DT_FLOAT,
                                                   TensorShape({batch_, units_}), &dv_rows));
    const float* k = context->input(0).flat<float>().data();
    const float* q = context->input(1).flat<float>().data();
    ConstRow v(context->input(2).flat<float>().data(), units_);
    const float* de = context->input(3).flat<float>().data();
    float* dk_data = dk->flat<float>().data();
    float* dq_data = dq->flat<float>().data();
    float* dv_data = dv_rows.flat<float>().data();
    ForRows(context, 30, [&](int64_t b) {
      ConstRow query(q + b * units_, units_);
      Row d_query(dq_data + b * units_, units_), d_v(dv_data + b * units_, units_);
      d_query.setZero();
      d_v.setZero();
      for (int64_t i = 0; i < length_; ++i) {
        const float g = de[b * length_ + i];
        ConstRow key(k + (b * length_ + i) * units_, units_);
        Row d_key(dk_data + (b * length_ + i) * units_, units_);
        if (g == 0.0f) {  // a padded position: nothing flows back
          d_key.setZero();
          continue;
        }
        d_key = (key + query).tanh();  // t, then dk = g v (.) (1 - t^2)
        d_v += g * d_key;
        d_key = g * v * (1.0f - d_key * d_key);
        d_query += d_key;
      }
    });
    Row total(dv->flat<float>().data(), units_);
    total.setZero();
    for (int64_t b = 0; b < batch_; ++b) total += ConstRow(dv_data + b * units_, units_);
  }
};

}  // namespace

// Each op: its inputs and outputs, and which input gives the units (index, width in units).
#define NMT_OP(NAME, INPUTS, OUTPUTS, UNIT_INPUT, UNIT_WIDTH, ...)                          \
  REGISTER_OP(NAME) INPUTS OUTPUTS.SetShapeFn([](InferenceContext* c) {                      \
    return Shapes(c, UNIT_INPUT, UNIT_WIDTH, {__VA_ARGS__});                                 \
  })

NMT_OP("NmtGruGates", .Input("x: float").Input("hu: float").Input("h: float"),
       .Output("h_next: float").Output("gates: float"), 0, 3, 1, 3);
NMT_OP("NmtGruGatesGrad",
       .Input("dh_next: float").Input("hu: float").Input("h: float").Input("gates: float"),
       .Output("dx: float").Output("dhu: float").Output("dh: float"), 1, 3, 3, 3, 1);
NMT_OP("NmtGruResetGates", .Input("x: float").Input("hu_zr: float").Input("h: float"),
       .Output("zr: float").Output("rh: float"), 0, 3, 2, 1);
NMT_OP("NmtGruResetGatesGrad",
       .Input("dzr: float").Input("drh: float").Input("zr: float").Input("h: float"),
       .Output("dx: float").Output("dhu_zr: float").Output("dh: float"), 3, 1, 3, 2, 1);
NMT_OP("NmtGruUpdate",
       .Input("x: float").Input("u: float").Input("h: float").Input("zr: float"),
       .Output("h_next: float").Output("h_tilde: float"), 2, 1, 1, 1);
NMT_OP("NmtGruUpdateGrad",
       .Input("dh_next: float").Input("h: float").Input("zr: float").Input("h_tilde: float"),
       .Output("dx: float").Output("du: float").Output("dh: float").Output("dzr: float"), 1, 1,
       3, 1, 1, 2);

REGISTER_OP("NmtAdditiveScore")
    .Input("keys: float").Input("query: float").Input("v: float").Output("scores: float")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle keys;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 3, &keys));
      c->set_output(0, c->Matrix(c->Dim(keys, 0), c->Dim(keys, 1)));
      return tensorflow::OkStatus();
    });
REGISTER_OP("NmtAdditiveScoreGrad")
    .Input("keys: float").Input("query: float").Input("v: float").Input("d_scores: float")
    .Output("d_keys: float").Output("d_query: float").Output("d_v: float")
    .SetShapeFn([](InferenceContext* c) {
      for (int i = 0; i < 3; ++i) c->set_output(i, c->input(i));
      return tensorflow::OkStatus();
    });

REGISTER_KERNEL_BUILDER(Name("NmtAdditiveScore").Device(DEVICE_CPU), AdditiveScore);
REGISTER_KERNEL_BUILDER(Name("NmtAdditiveScoreGrad").Device(DEVICE_CPU), AdditiveScoreGrad);
REGISTER_KERNEL_BUILDER(Name("NmtGruGates").Device(DEVICE_CPU), CallKernel<GruGates>);
REGISTER_KERNEL_BUILDER(Name("NmtGruGatesGrad").Device(DEVICE_CPU), CallKernel<GruGatesGrad>);
REGISTER_KERNEL_BUILDER(Name("NmtGruResetGates").Device(DEVICE_CPU), CallKernel<GruResetGates>);
REGISTER_KERNEL_BUILDER(Name("NmtGruResetGatesGrad").Device(DEVICE_CPU),
                        CallKernel<GruResetGatesGrad>);
REGISTER_KERNEL_BUILDER(Name("NmtGruUpdate").Device(DEVICE_CPU), CallKernel<GruUpdate>);
REGISTER_KERNEL_BUILDER(Name("NmtGruUpdateGrad").Device(DEVICE_CPU), CallKernel<GruUpdateGrad>);
