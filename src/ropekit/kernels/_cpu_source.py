"""C++ source of the CPU RoPE kernel, compiled on first use by :mod:`ropekit.kernels._cpu`.

Kept as a Python string so it ships inside the wheel with no package-data rule and no build step at install.

Why the result is bit-identical to the eager torch path (:func:`ropekit.kernels.reference.rotate`):

* the products ``x1·cos``, ``x2·sin`` are each rounded to fp32 and then added, exactly as the separate torch
  ops do; ``-ffp-contract=off`` stops the compiler fusing them into an FMA (one rounding instead of two);
* the conjugate rotation (backward) uses ``a + b`` where eager computes ``a - (x2·(−sin))``; negation is exact,
  so these are the same numbers;
* bf16 is rounded to nearest-even on the bit pattern, as ``Tensor.to(torch.bfloat16)`` does, with integer
  ops (not the AVX512-BF16 instruction, which flushes subnormals); fp16 uses the exact IEEE conversions
  of the FP16 library (also c10::Half's), written branch-free so they vectorize;
* tables are converted to the compute dtype with ``Tensor.to``, the same rounding eager applies.
"""

from __future__ import annotations

CPP_SOURCE = r"""
// ropekit CPU RoPE kernel: one read and one write of x; math in float (double for double input).
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/InferenceMode.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <tuple>

namespace {

struct BF16 {
  uint16_t bits;
};
struct F16 {
  uint16_t bits;
};

inline float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}
inline uint32_t to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float load(float v) { return v; }
inline double load(double v) { return v; }
inline float load(BF16 v) { return from_bits(static_cast<uint32_t>(v.bits) << 16); }
// IEEE half -> float, exact, branch-free so it vectorizes (the FP16 library's algorithm, as in c10::Half).
inline float load(F16 v) {
  const uint32_t w = static_cast<uint32_t>(v.bits) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const float normalized = from_bits((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  const float denormalized = from_bits((two_w >> 17) | (126u << 23)) - 0.5f;
  return from_bits(sign | (two_w < (1u << 27) ? to_bits(denormalized) : to_bits(normalized)));
}

inline void store(float* p, float v) { *p = v; }
inline void store(double* p, double v) { *p = v; }
inline void store(BF16* p, float v) {
  const uint32_t u = to_bits(v);
  // Round to nearest, ties to even (c10::BFloat16's rule); NaN stays a quiet NaN.
  const uint16_t rounded = static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  p->bits = (v != v) ? static_cast<uint16_t>(0x7FC0) : rounded;
}
// float -> IEEE half, round to nearest even with subnormals, overflow to inf, NaN kept (FP16 library / c10).
inline void store(F16* p, float v) {
  float base = (std::fabs(v) * 0x1.0p+112f) * 0x1.0p-110f;
  const uint32_t w = to_bits(v);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  bias = bias < 0x71000000u ? 0x71000000u : bias;
  base = from_bits((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = to_bits(base);
  const uint32_t nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
  p->bits = static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

// One head vector: rotate `half` pairs, then copy the pass-through dims unless writing in place.
// Every element is read and written in the same iteration, so x == y (in place) is safe.
template <typename T, typename A, bool INTERLEAVED, bool CONJ>
inline void rope_row(const T* x, T* y, const A* c, const A* s, int64_t half, int64_t tail, bool copy_tail) {
  if constexpr (INTERLEAVED) {
#pragma GCC ivdep
    for (int64_t i = 0; i < half; ++i) {
      const A x1 = load(x[2 * i]), x2 = load(x[2 * i + 1]);
      const A a = x1 * c[i], b = x2 * s[i], d = x2 * c[i], e = x1 * s[i];
      store(y + 2 * i, CONJ ? a + b : a - b);
      store(y + 2 * i + 1, CONJ ? d - e : d + e);
    }
  } else {
#pragma GCC ivdep
    for (int64_t i = 0; i < half; ++i) {
      const A x1 = load(x[i]), x2 = load(x[i + half]);
      const A a = x1 * c[i], b = x2 * s[i], d = x2 * c[i], e = x1 * s[i];
      store(y + i, CONJ ? a + b : a - b);
      store(y + i + half, CONJ ? d - e : d + e);
    }
  }
  if (copy_tail && tail > 0) std::memcpy(y + 2 * half, x + 2 * half, tail * sizeof(T));
}

template <typename T, typename A, bool INTERLEAVED, bool CONJ>
void rope_loop(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& out,
               int64_t half, bool seq_is_dim1) {
  // x viewed as (B, D1, D2, head_dim): D1 = seq (seq_dim=1) or heads (seq_dim=2).
  const int64_t D1 = x.size(1), D2 = x.size(2), head_dim = x.size(3);
  const int64_t rows = x.size(0) * D1 * D2;
  const int64_t tail = head_dim - 2 * half;
  const T* xp = static_cast<const T*>(x.const_data_ptr());
  T* yp = static_cast<T*>(out.data_ptr());
  const A* cp = cos.const_data_ptr<A>();
  const A* sp = sin.const_data_ptr<A>();
  const int64_t xs0 = x.stride(0), xs1 = x.stride(1), xs2 = x.stride(2);
  const int64_t ys0 = out.stride(0), ys1 = out.stride(1), ys2 = out.stride(2);
  // tables are (seq, r/2) or (batch | 1, seq, r/2), last dim contiguous; a shared table has batch stride 0
  const int64_t tb = (cos.dim() == 2 || cos.size(0) == 1) ? 0 : cos.stride(0), ts = cos.stride(cos.dim() - 2);
  const bool copy_tail = static_cast<const void*>(xp) != static_cast<void*>(yp);
  // Threads only pay off past ~64k elements (fork/join costs microseconds; decode shapes stay serial).
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(head_dim, 1));
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    int64_t k = begin % D2, j = (begin / D2) % D1, b = begin / (D1 * D2);
    for (int64_t r = begin; r < end; ++r) {
      const int64_t t = b * tb + (seq_is_dim1 ? j : k) * ts;
      rope_row<T, A, INTERLEAVED, CONJ>(xp + b * xs0 + j * xs1 + k * xs2, yp + b * ys0 + j * ys1 + k * ys2,
                                        cp + t, sp + t, half, tail, copy_tail);
      if (++k == D2) {
        k = 0;
        if (++j == D1) {
          j = 0;
          ++b;
        }
      }
    }
  });
}

template <typename T, typename A>
void rope_dispatch(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& out,
                   int64_t half, bool interleaved, bool seq_is_dim1, bool conjugate) {
  if (interleaved) {
    if (conjugate) rope_loop<T, A, true, true>(x, cos, sin, out, half, seq_is_dim1);
    else rope_loop<T, A, true, false>(x, cos, sin, out, half, seq_is_dim1);
  } else {
    if (conjugate) rope_loop<T, A, false, true>(x, cos, sin, out, half, seq_is_dim1);
    else rope_loop<T, A, false, false>(x, cos, sin, out, half, seq_is_dim1);
  }
}

// Same storage (cheap and conservative: a view of another part of the same buffer also counts).
bool aliases(const at::Tensor& a, const at::Tensor& b) {
  return a.has_storage() && b.has_storage() && a.storage().is_alias_of(b.storage());
}

// True when no two indices of t address the same element: with the dims of size > 1 sorted by stride, each
// stride must reach past the extent of the smaller ones. (Sufficient, not necessary; exotic views go eager.)
bool distinct_elements(const at::Tensor& t) {
  std::array<std::pair<int64_t, int64_t>, 4> dims{};  // (stride, size)
  int n = 0;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) > 1) dims[n++] = {t.stride(d), t.size(d)};
  std::sort(dims.begin(), dims.begin() + n);
  int64_t extent = 1;
  for (int i = 0; i < n; ++i) {
    if (dims[i].first < extent) return false;
    extent = dims[i].first * dims[i].second;
  }
  return true;
}

// True when the kernel can write the rotation of x into out (may be x): a supported dtype and device, a last dim
// that is contiguous, an output that shares no memory with the input (other than exactly, in place) or with a
// table, and no repeated elements in the output. Anything else goes to the eager path, which touches nothing here.
bool accepts(const at::Tensor& x, const at::Tensor& out, const at::Tensor& cos, const at::Tensor& sin,
             int64_t seq_dim) {
  const auto dtype = x.scalar_type();
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf && dtype != at::kDouble) return false;
  if (!x.device().is_cpu() || !out.device().is_cpu() || out.scalar_type() != dtype) return false;
  if (x.dim() != 4 || out.sizes() != x.sizes() || (seq_dim != 1 && seq_dim != 2)) return false;
  if (x.numel() == 0) return true;
  if (x.stride(3) != 1 || out.stride(3) != 1 || !x.has_storage() || !out.has_storage()) return false;
  if (!distinct_elements(out)) return false;
  if (aliases(x, out) && (x.const_data_ptr() != out.const_data_ptr() || x.strides() != out.strides())) return false;
  if (cos.sizes() != sin.sizes() || (cos.dim() != 2 && cos.dim() != 3)) return false;
  if (aliases(out, cos) || aliases(out, sin)) return false;
  return true;
}

// Tables in the compute dtype, as eager's .to(compute) rounds them; no dispatcher call when they already are.
at::Tensor as_compute(const at::Tensor& table, at::ScalarType dtype) {
  const auto compute = dtype == at::kDouble ? at::kDouble : at::kFloat;
  return (table.scalar_type() == compute ? table : table.to(compute)).contiguous();
}

void run(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& out,
         int64_t rotary_dim, bool interleaved, int64_t seq_dim, bool conjugate) {
  if (x.numel() == 0) return;
  const int64_t half = rotary_dim / 2;
  const bool d1 = seq_dim == 1;
  switch (x.scalar_type()) {
    case at::kFloat: rope_dispatch<float, float>(x, cos, sin, out, half, interleaved, d1, conjugate); break;
    case at::kDouble: rope_dispatch<double, double>(x, cos, sin, out, half, interleaved, d1, conjugate); break;
    case at::kBFloat16: rope_dispatch<BF16, float>(x, cos, sin, out, half, interleaved, d1, conjugate); break;
    default: rope_dispatch<F16, float>(x, cos, sin, out, half, interleaved, d1, conjugate); break;
  }
}

// Returns false (and touches nothing) when the inputs need the eager path. Shapes were validated by apply_rope.
bool rope_into(const at::Tensor& x, const at::Tensor& cos_in, const at::Tensor& sin_in, const at::Tensor& out,
               int64_t rotary_dim, bool interleaved, int64_t seq_dim, bool conjugate) {
  if (!accepts(x, out, cos_in, sin_in, seq_dim)) return false;
  run(x, as_compute(cos_in, x.scalar_type()), as_compute(sin_in, x.scalar_type()), out, rotary_dim, interleaved,
      seq_dim, conjugate);
  return true;
}

// x is a 4-D tensor the fast path may rotate with these tables: every shape rule of apply_rope holds.
bool fits(const at::Tensor& x, const at::Tensor& cos, int64_t seq_dim, int64_t rotary_dim) {
  if (x.dim() != 4 || x.size(3) < rotary_dim || x.size(seq_dim) != cos.size(cos.dim() - 2)) return false;
  return cos.dim() == 2 || cos.size(0) == 1 || cos.size(0) == x.size(0);
}

bool writable(const at::Tensor& x) {
  return !x.is_inference() || c10::InferenceMode::is_enabled();
}

// The whole of apply_rope / apply_rope_qk for the common case, in one call: validates (declining rather than
// raising: the Python path then gives the error message), allocates or writes in place, rotates q and k, and
// bumps the version counter of what it wrote. Returns (done, q_out, k_out); k may be undefined (None).
std::tuple<bool, at::Tensor, at::Tensor> rope_qk(const at::Tensor& q, const std::optional<at::Tensor>& k_opt,
                                                 const at::Tensor& cos, const at::Tensor& sin, bool interleaved,
                                                 int64_t seq_dim, bool inplace,
                                                 const std::optional<at::Tensor>& out_opt) {
  const std::tuple<bool, at::Tensor, at::Tensor> declined{false, at::Tensor(), at::Tensor()};
  const bool has_k = k_opt.has_value() && k_opt->defined();
  const at::Tensor k = has_k ? *k_opt : at::Tensor();
  if (seq_dim != 1 && seq_dim != 2) return declined;
  if (!cos.defined() || !sin.defined() || !cos.is_floating_point() || !sin.is_floating_point()) return declined;
  if (cos.dim() != 2 && cos.dim() != 3) return declined;
  if (cos.sizes() != sin.sizes() || !cos.device().is_cpu() || !sin.device().is_cpu()) return declined;
  const int64_t rotary_dim = 2 * cos.size(cos.dim() - 1);
  if (rotary_dim < 2 || !fits(q, cos, seq_dim, rotary_dim)) return declined;
  if (has_k && (!fits(k, cos, seq_dim, rotary_dim) || k.size(0) != q.size(0))) return declined;
  if (at::GradMode::is_enabled() &&
      (q.requires_grad() || cos.requires_grad() || sin.requires_grad() || (has_k && k.requires_grad())))
    return declined;  // autograd goes through the Python autograd.Function
  at::Tensor q_out = q, k_out = k;
  const bool has_out = out_opt.has_value() && out_opt->defined();
  if (has_out) {  // apply_rope(x, ..., out=): q is x, no k
    if (inplace || has_k || !writable(*out_opt) || out_opt->requires_grad()) return declined;
    q_out = *out_opt;
  } else if (inplace) {
    if (!writable(q) || (has_k && !writable(k))) return declined;
    if (has_k && aliases(q, k)) return declined;
  } else {
    q_out = at::empty_like(q);
    if (has_k) k_out = at::empty_like(k);
  }
  if (!accepts(q, q_out, cos, sin, seq_dim) || (has_k && !accepts(k, k_out, cos, sin, seq_dim))) return declined;
  const at::Tensor c = as_compute(cos, q.scalar_type()), s = as_compute(sin, q.scalar_type());
  run(q, c, s, q_out, rotary_dim, interleaved, seq_dim, false);
  if (has_k) {
    const bool same = k.scalar_type() == q.scalar_type() ||
                      (k.scalar_type() != at::kDouble && q.scalar_type() != at::kDouble);
    run(k, same ? c : as_compute(cos, k.scalar_type()), same ? s : as_compute(sin, k.scalar_type()), k_out,
        rotary_dim, interleaved, seq_dim, false);
  }
  if (inplace || has_out) {  // record the mutation as torch's own in-place ops do
    q_out.unsafeGetTensorImpl()->bump_version();
    if (has_k) k.unsafeGetTensorImpl()->bump_version();
  }
  return {true, q_out, k_out};
}

}  // namespace

PYBIND11_MODULE(_ropekit_cpu, m) {
  m.def("rope_into", &rope_into, pybind11::call_guard<pybind11::gil_scoped_release>(),
        "Rotate x into out (may be x); False if the eager path must handle these inputs.");
  m.def("rope_qk", &rope_qk, pybind11::call_guard<pybind11::gil_scoped_release>(),
        "Validate and rotate q (and k, or None; or into out) in one call; (False, None, None) if Python must run.");
}
"""
